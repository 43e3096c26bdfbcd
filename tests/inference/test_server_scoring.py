"""vLLM's `logprob_token_ids` on the embedded model server (dataplatform/inference/server_scoring.py), checked against
vLLM's own request and response models, and the vLLM client's next-token scoring (dataplatform/inference/
vllm_scoring.py) through it end to end with the real model: the listed path and the fallback score alike, and the
listed path sends each prompt once."""

import json
import math
from types import SimpleNamespace

import httpx
import pytest
from pydantic import ValidationError
from vllm.entrypoints.openai.completion.protocol import (
    CompletionRequest,
    CompletionResponseChoice,
    CompletionStreamResponse,
)
from vllm.exceptions import VLLMValidationError

from dataplatform.inference.server import MAX_LOGPROBS
from dataplatform.inference.server_scoring import MAX_LOGPROB_TOKEN_IDS
from dataplatform.inference.vllm import VllmBackend
from dataplatform.inference.vllm_wire import id_of_key

from .model_servers import KEY, SERVED_NAME

pytestmark = pytest.mark.model

TOLERANCE = 1e-4
TEXTS = ("The capital of France is", "One, two, three,")  # short: each forward pass costs ~0.1 s on 2 cores


@pytest.fixture
def client(model_server):
    backend = VllmBackend(base_url=model_server.url, model=SERVED_NAME, api_key=KEY, timeout=60, tokenizer_dir=None)
    yield backend
    backend.close()


def recorded(backend: VllmBackend) -> list[dict]:
    """The bodies of the /v1/completions requests `backend` sends from now on."""
    bodies: list[dict] = []

    def record(request: httpx.Request) -> None:
        if request.url.path == "/v1/completions":
            bodies.append(json.loads(request.content))

    backend._client.event_hooks["request"].append(record)
    return bodies


def test_listed_candidates_score_as_the_fallback_and_the_local_model(client, local_backend):
    prompts = [local_backend.tokenize(text) for text in TEXTS]
    argmax = next(local_backend.stream(prompts[0], max_tokens=1, temperature=0, seed=None, top_k=1)).token_id
    far = local_backend.tokenize(" zymurgy")[0]
    candidates = [argmax, local_backend.tokenize(" four")[0], far]
    direct = local_backend.next_token_logprobs(prompts, candidates)
    assert max(direct[0], key=direct[0].get) == argmax and direct[0][far] < direct[0][argmax] - 10  # far down
    bodies = recorded(client)

    listed = client.next_token_logprobs(prompts, candidates)
    assert client.answers_logprob_token_ids is True
    # One request for the batch, each prompt once.
    assert [(body["prompt"], body["logprob_token_ids"]) for body in bodies] == [(prompts, candidates)]

    bodies.clear()
    client.answers_logprob_token_ids = False  # the fallback, forced
    fallback = client.next_token_logprobs(prompts, candidates)
    # As before: one request for the batch, one sequence per (prompt, candidate).
    assert [body["prompt"] for body in bodies] == [[[*ids, c] for ids in prompts for c in candidates]]
    assert "logprob_token_ids" not in bodies[0]

    differences = [abs(row[c] - other[c]) for others in (fallback, direct)
                   for row, other in zip(listed, others, strict=True) for c in candidates]
    assert all(row.keys() == set(candidates) for row in (*listed, *fallback))
    print(f"listed vs fallback and local: max |difference| = {max(differences):.2e}")
    assert max(differences) < TOLERANCE


def vllm_refusal(body: dict, vocab_size: int) -> VLLMValidationError | ValidationError | None:
    """What vLLM 0.34 refuses `body` with (its request model, its sampling parameters' logprobs checks with this
    server's --max-logprobs), or None when it takes it."""
    try:
        request = CompletionRequest(**body)
        params = request.to_sampling_params(request.max_tokens or 16)
        params._validate_logprobs(SimpleNamespace(max_logprobs=MAX_LOGPROBS, get_vocab_size=lambda: vocab_size))
    except (VLLMValidationError, ValidationError) as refusal:
        return refusal
    return None


def test_the_server_takes_and_refuses_logprob_token_ids_as_vllm_does(model_server, local_backend):
    ids = local_backend.tokenize(TEXTS[0])
    vocab = local_backend.model.config.vocab_size
    candidates = [local_backend.tokenize(word)[0] for word in (" Paris", " Lyon", " banana")]
    base = {"model": SERVED_NAME, "prompt": ids, "max_tokens": 2, "temperature": 0, "logprobs": 0,
            "return_tokens_as_token_ids": True}
    cases = {
        "listed": base | {"logprob_token_ids": candidates},
        "listed, more than --max-logprobs": base | {"logprob_token_ids": list(range(MAX_LOGPROBS + 1))},
        "empty: the top k": base | {"logprobs": 2, "logprob_token_ids": []},
        "no logprobs": base | {"logprobs": None, "logprob_token_ids": candidates},
        "over vLLM's cap": base | {"logprob_token_ids": list(range(MAX_LOGPROB_TOKEN_IDS + 1))},
        "out of the vocabulary": base | {"logprob_token_ids": [candidates[0], vocab]},
    }
    for case, body in cases.items():
        response = httpx.post(f"{model_server.url}/v1/completions", json=body,
                              headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
        refusal = vllm_refusal(body, vocab)
        if refusal is not None:
            assert response.status_code == 400, case
            error = response.json()["error"]
            assert (error["message"], error["param"]) == (refusal.args[0], refusal.parameter), case
            continue
        assert response.status_code == 200, (case, response.text)
        [choice] = response.json()["choices"]
        logprobs = CompletionResponseChoice.model_validate(choice).logprobs
        assert len(logprobs.tokens) == 2, case
        listed = body["logprob_token_ids"]
        prefix = list(ids)
        for token, top in zip(logprobs.tokens, logprobs.top_logprobs, strict=True):
            got = {id_of_key(key): value for key, value in top.items()}
            if not listed:  # the natural top k, plus the sampled token
                assert id_of_key(token) in got and len(got) <= body["logprobs"] + 1, case
            else:  # the sampled token and every listed id, at this position
                assert got.keys() == {id_of_key(token), *listed}, case
                [want] = local_backend.next_token_logprobs([prefix], listed)
                assert all(math.isclose(got[i], want[i], abs_tol=TOLERANCE) for i in listed), case
            prefix.append(id_of_key(token))


def test_the_server_streams_logprob_token_ids(model_server, local_backend):
    ids = local_backend.tokenize(TEXTS[1])
    candidates = [local_backend.tokenize(word)[0] for word in (" four", " five")]
    body = {"model": SERVED_NAME, "prompt": ids, "max_tokens": 2, "temperature": 0, "logprobs": 0, "stream": True,
            "logprob_token_ids": candidates, "return_tokens_as_token_ids": True}
    with httpx.stream("POST", f"{model_server.url}/v1/completions", json=body,
                      headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as response:
        events = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [CompletionStreamResponse.model_validate_json(event) for event in events[:-1]]
    tops = [top for chunk in chunks for top in chunk.choices[0].logprobs.top_logprobs]
    assert len(tops) == 2
    assert all({id_of_key(key) for key in top} >= set(candidates) for top in tops)
