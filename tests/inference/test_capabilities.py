"""The operator's check of a model server (dataplatform/inference/capabilities.py), run against the embedded model
server started as vLLM would be with a low `--max-logprobs`, against a vLLM-shaped one that reveals an old version
and its generation config, against nothing at all, and on the embedded model itself."""

import json

import pytest
from django.test import override_settings
from starlette.responses import JSONResponse

from dataplatform.inference.capabilities import CHECKS, SAMPLING_FIELDS, VLLM_ONLY, capability_report
from dataplatform.inference.server import build_app
from dataplatform.inference.vllm import VllmBackend
from tests.net import closed_port

from .model_servers import KEY, SERVED_NAME, ThreadedServer

CAP = 2  # the server's --max-logprobs here: below any project's usual top-k


class VllmOnlyRoutes:
    """ASGI middleware: the routes of vLLM that the embedded model server lacks (`/version`, and `/server_info` as
    VLLM_SERVER_DEV_MODE serves it), answered from `extras` when a test sets them; and every /v1/completions body
    the client sends, kept in `bodies`."""

    def __init__(self, app):
        self.app, self.extras, self.bodies = app, {}, []

    async def __call__(self, scope, receive, send):
        path = scope.get("path")
        if scope["type"] == "http" and path in self.extras:
            return await JSONResponse(self.extras[path])(scope, receive, send)
        if scope["type"] != "http" or path != "/v1/completions":
            return await self.app(scope, receive, send)
        chunks = []

        async def keep():
            message = await receive()
            if message["type"] == "http.request":  # not the disconnect a streamed answer listens for
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    self.bodies.append(json.loads(b"".join(chunks)))
            return message

        return await self.app(scope, keep, send)


@pytest.fixture(scope="module")
def capped(local_backend):
    """The embedded model server started as `vllm serve --max-logprobs 2` would be."""
    routes = VllmOnlyRoutes(build_app(local_backend, served_model_name=SERVED_NAME, api_key=KEY, max_logprobs=CAP))
    with ThreadedServer(routes) as server:
        server.routes = routes
        yield server


def client_of(url: str, model: str = SERVED_NAME) -> VllmBackend:
    return VllmBackend(base_url=url, model=model, api_key=KEY, timeout=30, tokenizer_dir=None)


def report_of(url: str, *, model: str = SERVED_NAME, top_k: int):
    # The raw probes (version, token keys, config) reach the server the settings name, as the platform's default
    # backend is built from them.
    with override_settings(VLLM_BASE_URL=url, VLLM_API_KEY=KEY, MODEL_NAME=model):
        return capability_report(client_of(url, model), top_k=top_k)


def run(server, *, top_k: int, **extras):
    """A report of `server` (the request bodies the client sent beside it), with vLLM's extra routes answering."""
    server.routes.extras.clear()
    server.routes.extras.update(extras)
    server.routes.bodies.clear()
    try:
        return report_of(server.url, top_k=top_k), list(server.routes.bodies)
    finally:
        server.routes.extras.clear()


# One report over the cap, one within it (each ~2 s of model calls), read by several tests.
@pytest.fixture(scope="module")
def over(capped):
    """top-k 5 against --max-logprobs 2, from an old vLLM that fills sampling fields from the model's config."""
    return run(capped, top_k=5, **{"/version": {"version": "0.11.2"}, "/server_info": {"vllm_config": {
        "model_config": {"generation_config": "auto", "override_generation_config": {"top_p": 0.9}}}}})[0]


@pytest.fixture(scope="module")
def within(capped):
    """top-k 2 against --max-logprobs 2, from no vLLM at all (the embedded model server has no /version)."""
    return run(capped, top_k=CAP)


def lines(report) -> dict:
    return {capability.name: capability for capability in report.capabilities}


def test_a_top_k_over_the_server_s_max_logprobs_fails_with_the_flag_to_change(over):
    line = lines(over)["max_logprobs"]
    assert line.ok is False and not over.ok and line in over.failures
    assert "max allowed: 2" in line.seen.english()  # the server's own refusal
    assert "--max-logprobs 5" in line.fix.english() and "FAIL" in line.line() and "fix:" in line.line()
    # Everything else the platform needs is there, and said so.
    assert all(lines(over)[name].ok for name in ("served_model", "tokenize", "token_ids", "json", "choice"))


def test_within_the_server_s_max_logprobs_every_line_passes_or_informs(within):
    report, _ = within
    assert report.ok and report.failures == []
    assert [capability.name for capability in report.capabilities] == list(CHECKS)
    assert lines(report)["max_logprobs"].ok and "top-2" in lines(report)["max_logprobs"].seen.english()
    assert lines(report)["token_ids"].seen.english().startswith("tokens come back as token_id:")
    assert json.loads(lines(report)["json"].seen.english().removeprefix("answered "))["answer"] in ("yes", "no")
    # The embedded model server is not vLLM and says no version: unknown, not a failure.
    assert lines(report)["version"].ok is None and "404" in lines(report)["version"].seen.english()


def test_the_sampling_line_says_what_the_client_s_requests_leave_to_the_server(within):
    report, bodies = within
    [stream] = [body for body in bodies if body.get("stream")]  # the top-k probe, as the client sends it
    missing = [name for name in SAMPLING_FIELDS if name not in stream]
    line = lines(report)["sampling"]
    if missing:  # the server fills those from the model's generation_config.json: the fix is its flag
        assert line.ok is not True and ", ".join(missing) in line.seen.english()
        assert "--generation-config vllm" in line.fix.english()
    else:
        assert line.ok is True and line.fix is None and "every sampling field" in line.seen.english()


def test_the_sampling_fields_are_those_vllm_fills_from_the_model_s_generation_config():
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest

    defaults = CompletionRequest.__private_attributes__["_DEFAULT_SAMPLING_PARAMS"].default
    assert set(SAMPLING_FIELDS) == set(defaults)


def test_a_vllm_older_than_the_client_needs_fails_and_its_dev_config_is_reported(over):
    version, sampling = lines(over)["version"], lines(over)["sampling"]
    assert version.ok is False and version.seen.english() == "vLLM 0.11.2" and "0.12+" in version.fix.english()
    assert '--generation-config auto --override-generation-config {"top_p": 0.9}' in sampling.seen.english()


def test_an_unreachable_server_is_one_failure_with_its_fix_and_nothing_else_is_checked():
    url = f"http://127.0.0.1:{closed_port()}"
    report = report_of(url, top_k=5)
    served, *rest = report.capabilities
    assert served.ok is False and "ConnectError" in served.seen.english() and "VLLM_BASE_URL" in served.fix.english()
    assert [line.name for line in rest] == list(CHECKS)[1:]
    assert all(line.ok is None and line.seen.english().startswith("not checked") for line in rest)
    assert report.model == SERVED_NAME and report.failures == [served]


def test_a_model_name_the_server_does_not_serve_fails_with_both_ways_out(capped):
    report = report_of(capped.url, model="not-served", top_k=CAP)
    served = lines(report)["served_model"]
    assert served.ok is False and SERVED_NAME in served.seen.english()
    assert "MODEL_NAME" in served.fix.english() and "--served-model-name not-served" in served.fix.english()


def test_the_embedded_model_is_checked_for_what_applies_to_it(local_backend):
    report = capability_report(local_backend, top_k=5)
    assert report.backend == "local" and report.ok
    assert [line.name for line in report.capabilities] == [name for name in CHECKS if name not in VLLM_ONLY]
    assert all(line.ok for line in report.capabilities), [line.line() for line in report.capabilities]


def test_a_report_survives_its_json_in_every_language(over):
    from django.utils import translation

    report = over
    again = type(report).from_json(json.loads(json.dumps(report.as_json())))
    assert again.as_json() == report.as_json() and lines(again)["max_logprobs"].ok is False
    # On a page, the server's words and the flags are data, marked so that no translation touches them.
    with translation.override("zh-hans"):
        html = str(lines(again)["max_logprobs"].fix_html())
    assert '<span translate="no">--max-logprobs 5</span>' in html
