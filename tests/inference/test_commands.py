"""The operators' commands of the inference layer: `model_check` (health, a sample, the capability report, its exit
code) and `serve_model --max-logprobs` (the embedded model server capped as vLLM would be)."""

import io
from types import SimpleNamespace

import pytest
from django.core.management import CommandError, call_command
from starlette.testclient import TestClient

from dataplatform.inference.server import build_app
from dataplatform.inference.vllm import VllmBackend
from tests.net import closed_port

from .model_servers import KEY, SERVED_NAME, ThreadedServer


def model_check(*args: str) -> tuple[str, CommandError | None]:
    out = io.StringIO()
    try:
        call_command("model_check", *args, stdout=out)
    except CommandError as exc:
        return out.getvalue(), exc
    return out.getvalue(), None


@pytest.fixture
def vllm_at(settings, use_backend):
    """Make the platform's default backend a vLLM client of `url`, which the settings name too (as in production:
    the capability check's own requests go there)."""

    def point(url: str) -> VllmBackend:
        settings.MODEL_BACKEND, settings.VLLM_BASE_URL = "vllm", url
        settings.VLLM_API_KEY, settings.MODEL_NAME = KEY, SERVED_NAME
        return use_backend(VllmBackend(base_url=url, model=SERVED_NAME, api_key=KEY, timeout=30, tokenizer_dir=None))

    return point


def test_model_check_against_a_server_capped_below_the_top_k_fails_and_says_the_flag(local_backend, vllm_at):
    app = build_app(local_backend, served_model_name=SERVED_NAME, api_key=KEY, max_logprobs=2)
    with ThreadedServer(app) as server:
        vllm_at(server.url)
        output, error = model_check("--top-k", "5", "--tokens", "2")
    assert error is not None and "max_logprobs" in str(error) and "the sample failed" in str(error)
    assert "health:   ok" in output
    [line] = [line for line in output.splitlines() if "(--max-logprobs)" in line]
    assert line.strip().startswith("FAIL") and "max allowed: 2" in line
    assert "fix: Start vLLM with --max-logprobs 5 or more" in output
    assert "PASS  Structured outputs: choice" in output  # the rest is checked all the same


def test_model_check_on_an_unreachable_server_is_a_clear_failure_not_a_traceback(vllm_at):
    vllm_at(f"http://127.0.0.1:{closed_port()}")
    output, error = model_check()
    assert error is not None and "the backend is down" in str(error) and "Traceback" not in output
    assert "health:   DOWN" in output and "sample:   skipped" in output
    assert "FAIL  Served model" in output and "fix: Start the server, or point VLLM_BASE_URL at it" in output


def test_model_check_on_the_embedded_model_passes_with_its_sample(local_backend):
    output, error = model_check("--tokens", "3", "--top-k", "5")
    assert error is None, output
    assert "sample:" in output and "timings:" in output
    assert "the embedded model's (the checks that apply to it)" in output
    assert output.count("PASS") == 6 and "FAIL" not in output and "Tokens as ids" not in output


def test_model_check_quiet_still_only_loads_and_checks_health(local_backend):
    output, error = model_check("--quiet")
    assert error is None and "ready in" in output and "capabilities" not in output


def test_serve_model_caps_logprobs_in_vllm_s_own_words(local_backend, monkeypatch):
    """`serve_model --max-logprobs 2` answers a request over it as vLLM 0.34 does: its SamplingParams' message."""
    from vllm.exceptions import VLLMValidationError
    from vllm.sampling_params import SamplingParams

    served = {}
    monkeypatch.setattr("dataplatform.inference.management.commands.serve_model.LocalBackend",
                        lambda data_dir: local_backend)
    monkeypatch.setattr("uvicorn.run", lambda app, **options: served.update(app=app))
    call_command("serve_model", "--max-logprobs", "2", stdout=io.StringIO())
    ids = local_backend.tokenize("Hello")
    with TestClient(served["app"]) as client:
        for field in ("logprobs", "prompt_logprobs"):
            answer = client.post("/v1/completions", json={"prompt": ids, "max_tokens": 1, field: 3})
            with pytest.raises(VLLMValidationError) as vllm_s:
                SamplingParams(**{field: 3})._validate_logprobs(SimpleNamespace(max_logprobs=2))
            assert answer.status_code == 400
            assert answer.json()["error"] == {"message": str(vllm_s.value), "type": "BadRequestError",
                                               "param": field, "code": 400}
        assert client.post("/v1/completions", json={"prompt": ids, "max_tokens": 1, "logprobs": 2,
                                                    "prompt_logprobs": 2}).status_code == 200
