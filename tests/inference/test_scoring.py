"""Batched scoring: next-token logprobs of chosen tokens and logprobs of given continuations, on both backends."""

import json
from types import SimpleNamespace

import pytest
from werkzeug import Request, Response

from dataplatform.inference.base import BackendError, BackendUnavailable
from dataplatform.inference.vllm import VllmBackend
from dataplatform.inference.vllm_scoring import MAX_LOGPROB_TOKEN_IDS
from dataplatform.inference.vllm_wire import NEUTRAL_SAMPLING

from ..lazy_module import LazyModule

vllm_sampling = LazyModule("vllm.sampling_params")
vllm_protocol = LazyModule("vllm.entrypoints.openai.completion.protocol")
vllm_exceptions = LazyModule("vllm.exceptions")

MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"


# --- vLLM against a fake server -------------------------------------------------------
@pytest.fixture
def backend(httpserver):
    backend = VllmBackend(base_url=httpserver.url_for(""), model=MODEL, api_key="", timeout=5, tokenizer_dir=None)
    yield backend
    backend.close()


def fake_logprob(prompt: int, position: int, token: int) -> float:
    """A logprob the fake server gives token `token` at `position` of prompt number `prompt` of a request."""
    return -(prompt * 100 + position + token / 1000)


def prompt_entries(index: int, ids: list[int]) -> list[dict | None]:
    """vLLM's prompt_logprobs for one prompt: null first, then the top 1 ("28" here) plus the actual token,
    keys as plain id strings or "token_id:N" (vLLM versions differ)."""
    entries: list[dict | None] = [None]
    for position, token in enumerate(ids[1:], start=1):
        key = f"token_id:{token}" if position % 2 else str(token)
        entry = {"28": {"logprob": -0.01, "rank": 1, "decoded_token": "x"}}
        entry[key] = {"logprob": fake_logprob(index, position, token), "rank": 5, "decoded_token": "y"}
        entries.append(entry)
    return entries


def candidate_logprob(prompt: int, token: int) -> float:
    """A logprob the fake server gives candidate `token` after prompt number `prompt` of a request."""
    return -(prompt + token / 1000)


def serve_completions(httpserver, *, reverse: bool = True, knows_candidates: bool = False) -> list[dict]:
    """Answer /v1/completions as vLLM does, choices in reverse order; return the bodies sent. `prompt_logprobs` is
    answered for every prompt; `logprob_token_ids` as vLLM 0.34 answers it with `knows_candidates` (the sampled token,
    "28", and every listed id at the generated position), else as an older vLLM that ignores the field (the sampled
    token alone, `logprobs` 0)."""
    seen: list[dict] = []

    def completions(request: Request) -> Response:
        body = json.loads(request.data)
        seen.append(body)
        choices = []
        for index, ids in enumerate(body["prompt"]):
            choice = {"index": index, "text": "token_id:28", "logprobs": None, "finish_reason": "length",
                      "stop_reason": None}
            if body.get("prompt_logprobs") is not None:
                choice["prompt_logprobs"] = prompt_entries(index, ids)
            if body.get("logprobs") is not None:
                listed = body.get("logprob_token_ids") if knows_candidates else []
                top = {"token_id:28": -0.01} | {f"token_id:{token}": candidate_logprob(index, token) for token in listed}
                choice["logprobs"] = {"text_offset": [0], "token_logprobs": [-0.01], "tokens": ["token_id:28"],
                                      "top_logprobs": [top]}
            choices.append(choice)
        return Response(json.dumps({"id": "cmpl-1", "object": "text_completion", "model": MODEL,
                                    "choices": choices[::-1] if reverse else choices}),
                        content_type="application/json")

    httpserver.expect_request("/v1/completions", method="POST").respond_with_handler(completions)
    return seen


def subset(body: dict, fields: dict) -> dict:
    return {field: body.get(field) for field in fields}


CANDIDATE_REQUEST = {"max_tokens": 1, "temperature": 0, **NEUTRAL_SAMPLING, "logprobs": 0, "return_tokens_as_token_ids": True}


def test_vllm_next_token_logprobs_one_request_for_the_batch(httpserver, backend):
    seen = serve_completions(httpserver, knows_candidates=True)

    result = backend.next_token_logprobs([[1, 2], [3], [4, 5, 6]], [7, 9, 7])

    # One request, each prompt once (not once per candidate), the candidates listed once each.
    expected = {"model": MODEL, "prompt": [[1, 2], [3], [4, 5, 6]], "logprob_token_ids": [7, 9], **CANDIDATE_REQUEST}
    assert len(seen) == 1 and subset(seen[0], expected) == expected
    assert "prompt_logprobs" not in seen[0]
    # vLLM's own request model takes the body as asked: the candidates listed, one token.
    params = vllm_protocol.CompletionRequest(**seen[0]).to_sampling_params(1)
    assert params.logprob_token_ids == [7, 9] and params.max_tokens == 1 and params.prompt_logprobs is None
    # Choices came back reversed: each is mapped back by its index.
    assert result == [{7: candidate_logprob(0, 7), 9: candidate_logprob(0, 9)},
                      {7: candidate_logprob(1, 7), 9: candidate_logprob(1, 9)},
                      {7: candidate_logprob(2, 7), 9: candidate_logprob(2, 9)}]
    assert backend.answers_logprob_token_ids is True

    backend.max_batch_sequences = 2  # prompts per request, on this path
    backend.next_token_logprobs([[1, 2], [3], [4, 5, 6]], [7])
    assert [body["prompt"] for body in seen[1:]] == [[[1, 2], [3]], [[4, 5, 6]]]


def test_vllm_next_token_logprobs_fall_back_once_on_a_server_without_logprob_token_ids(httpserver, backend):
    seen = serve_completions(httpserver, knows_candidates=False)

    result = backend.next_token_logprobs([[1, 2], [3], [4, 5, 6]], [7, 9])

    # The probe, answered without the candidates, then today's path: one sequence per (prompt, candidate).
    assert [body.get("logprob_token_ids") for body in seen] == [[7, 9], None]
    fallback = {"model": MODEL, "prompt": [[1, 2, 7], [1, 2, 9], [3, 7], [3, 9], [4, 5, 6, 7], [4, 5, 6, 9]],
                "max_tokens": 1, "temperature": 0, **NEUTRAL_SAMPLING, "prompt_logprobs": 1, "logprobs": None}
    assert subset(seen[1], fallback) == fallback
    assert vllm_protocol.CompletionRequest(**seen[1]).to_sampling_params(1).prompt_logprobs == 1
    assert result == [
        {7: fake_logprob(0, 2, 7), 9: fake_logprob(1, 2, 9)},
        {7: fake_logprob(2, 1, 7), 9: fake_logprob(3, 1, 9)},
        {7: fake_logprob(4, 3, 7), 9: fake_logprob(5, 3, 9)},
    ]
    assert backend.answers_logprob_token_ids is False

    # Remembered: the next call goes straight to the fallback, one request as before.
    assert backend.next_token_logprobs([[3]], [7]) == [{7: fake_logprob(0, 1, 7)}]
    assert len(seen) == 3 and seen[2]["prompt"] == [[3, 7]] and "logprob_token_ids" not in seen[2]


def test_vllm_next_token_logprobs_over_vllm_s_cap_take_the_fallback(httpserver, backend):
    seen = serve_completions(httpserver, knows_candidates=True)
    candidates = list(range(100, 100 + MAX_LOGPROB_TOKEN_IDS + 1))

    result = backend.next_token_logprobs([[1]], candidates)

    assert len(seen) == 1 and "logprob_token_ids" not in seen[0] and len(seen[0]["prompt"]) == len(candidates)
    assert list(result[0]) == candidates
    assert backend.answers_logprob_token_ids is None  # nothing learned of the server
    # At the cap, the listed path.
    backend.next_token_logprobs([[1]], candidates[:-1])
    assert seen[1]["logprob_token_ids"] == candidates[:-1]


def test_the_cap_is_vllm_s_and_not_max_logprobs():
    """vLLM checks `logprob_token_ids` against its own cap and not --max-logprobs: `logprobs` is dropped from the
    sampling parameters of such a request. A body of the listed path asks for no prompt logprobs, so vLLM's prefix
    cache serves it; the fallback's `prompt_logprobs` turns the cache off (`skip_reading_prefix_cache`)."""
    model_config = SimpleNamespace(max_logprobs=20, get_vocab_size=lambda: 49_152)
    assert MAX_LOGPROB_TOKEN_IDS == vllm_sampling.MAX_LOGPROB_TOKEN_IDS
    for count, refused in ((MAX_LOGPROB_TOKEN_IDS, False), (MAX_LOGPROB_TOKEN_IDS + 1, True)):
        listed = vllm_protocol.CompletionRequest(model=MODEL, prompt=[[1]], **CANDIDATE_REQUEST,
                                   logprob_token_ids=list(range(count))).to_sampling_params(1)
        assert listed.logprobs is None and listed.skip_reading_prefix_cache is False
        if refused:
            with pytest.raises(vllm_exceptions.VLLMValidationError, match="greater than max allowed: 128"):
                listed._validate_logprobs(model_config)
        else:
            listed._validate_logprobs(model_config)
    fallback = vllm_protocol.CompletionRequest(model=MODEL, prompt=[[1, 7]], max_tokens=1, temperature=0,
                                 prompt_logprobs=1).to_sampling_params(1)
    assert fallback.skip_reading_prefix_cache is True


def test_vllm_continuation_logprobs_one_request_for_the_batch(httpserver, backend):
    seen = serve_completions(httpserver)

    result = backend.continuation_logprobs([([1, 2], [5, 6, 7]), ([3], []), ([4], [8])])

    assert len(seen) == 1 and seen[0]["prompt"] == [[1, 2, 5, 6, 7], [4, 8]]  # nothing to score for ([3], [])
    assert seen[0]["prompt_logprobs"] == 1 and seen[0]["max_tokens"] == 1
    assert result == [
        [fake_logprob(0, 2, 5), fake_logprob(0, 3, 6), fake_logprob(0, 4, 7)],
        [],
        [fake_logprob(1, 1, 8)],
    ]


def test_vllm_scoring_splits_large_batches_into_chunks(httpserver, backend):
    seen = serve_completions(httpserver, reverse=False)
    backend.max_batch_sequences = 2

    result = backend.continuation_logprobs([([1], [2]), ([3], [4]), ([5], [6])])

    assert [body["prompt"] for body in seen] == [[[1, 2], [3, 4]], [[5, 6]]]
    assert result == [[fake_logprob(0, 1, 2)], [fake_logprob(1, 1, 4)], [fake_logprob(0, 1, 6)]]


def test_vllm_scoring_empty_batches_send_nothing(httpserver, backend):
    assert backend.next_token_logprobs([], [1]) == []
    assert backend.next_token_logprobs([[1]], []) == [{}]
    assert backend.continuation_logprobs([]) == []
    assert backend.continuation_logprobs([([1], [])]) == [[]]
    assert len(httpserver.log) == 0
    with pytest.raises(BackendError, match="non-empty"):
        backend.continuation_logprobs([([], [1])])
    with pytest.raises(BackendError, match="non-empty"):
        backend.next_token_logprobs([[]], [1])


def test_vllm_wrong_entry_count_is_backend_error(httpserver, backend):
    httpserver.expect_request("/v1/completions", method="POST").respond_with_json({"choices": [
        {"index": 0, "text": "", "prompt_logprobs": prompt_entries(0, [1, 2])},  # the prompt had 3 tokens
    ]})
    backend.answers_logprob_token_ids = False  # today's path
    with pytest.raises(BackendError, match="2 prompt logprobs for 3 prompt tokens") as raised:
        backend.next_token_logprobs([[1, 2]], [7])
    assert not isinstance(raised.value, BackendUnavailable)


def test_vllm_missing_choice_is_backend_error(httpserver, backend):
    httpserver.expect_request("/v1/completions", method="POST").respond_with_json({"choices": [
        {"index": 1, "text": "", "prompt_logprobs": prompt_entries(1, [3, 4])},
    ]})
    with pytest.raises(BackendError, match=r"choices \[1\] for 2 prompts"):
        backend.continuation_logprobs([([1], [2]), ([3], [4])])
    with pytest.raises(BackendError, match=r"choices \[1\] for 2 prompts"):
        backend.next_token_logprobs([[1], [3]], [7])


def test_vllm_missing_token_in_entry_is_backend_error(httpserver, backend):
    httpserver.expect_request("/v1/completions", method="POST").respond_with_json({"choices": [
        {"index": 0, "text": "", "prompt_logprobs": [None, {"28": {"logprob": -0.1}}]},
    ]})
    backend.answers_logprob_token_ids = False  # today's path
    with pytest.raises(BackendError, match="lack token 7"):
        backend.next_token_logprobs([[1]], [7])


def test_vllm_scoring_503_is_unavailable_and_400_is_error(httpserver, backend):
    httpserver.expect_oneshot_request("/v1/completions", method="POST").respond_with_json(
        {"object": "error", "message": "The engine is overloaded.", "code": 503}, status=503)
    with pytest.raises(BackendUnavailable, match="HTTP 503: The engine is overloaded"):
        backend.next_token_logprobs([[1, 2]], [7])
    assert backend.answers_logprob_token_ids is None  # a server down says nothing of what it supports

    httpserver.expect_oneshot_request("/v1/completions", method="POST").respond_with_json(
        {"error": {"message": "prompt_logprobs must be at most 20", "code": 400}}, status=400)
    with pytest.raises(BackendError, match="HTTP 400: prompt_logprobs must be at most 20") as raised:
        backend.continuation_logprobs([([1], [2])])
    assert not isinstance(raised.value, BackendUnavailable)


# --- the local backend with the real model ---------------------------------------------
TEXTS = ("The capital of France is", "Hello", "One, two, three, four, five, six,")
CONTINUATIONS = (" Paris, a city of light.", " world!", " seven")
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def prompts(local_backend):
    prompts = [local_backend.tokenize(text) for text in TEXTS]
    assert len({len(ids) for ids in prompts}) == 3  # different lengths, so the batch is padded
    return prompts


@pytest.mark.model
def test_local_next_token_logprobs_match_single_sequence_scoring(local_backend, prompts):
    candidates = [local_backend.tokenize(word)[0] for word in (" Paris", " world", " seven")] + [2]
    batched = local_backend.next_token_logprobs(prompts, candidates)

    assert len(batched) == len(prompts)
    differences = []
    for ids, scores in zip(prompts, batched, strict=True):
        assert set(scores) == set(candidates)
        for candidate in candidates:
            alone = local_backend.prompt_logprobs([*ids, candidate], top_k=1)[-1][candidate]
            differences.append(abs(scores[candidate] - alone))
            assert scores[candidate] <= 0
    print(f"next_token_logprobs: max |batched - alone| = {max(differences):.2e}")
    assert max(differences) < TOLERANCE
    # The model prefers the obvious continuation of each prompt.
    assert max(batched[0], key=batched[0].get) == candidates[0]


@pytest.mark.model
def test_local_continuation_logprobs_match_single_sequence_scoring(local_backend, prompts, monkeypatch):
    pairs = [(ids, local_backend.tokenize(text)) for ids, text in zip(prompts, CONTINUATIONS, strict=True)]
    pairs.append((prompts[1], []))
    batched = local_backend.continuation_logprobs(pairs)

    assert [len(scores) for scores in batched] == [len(continuation) for _, continuation in pairs]
    differences = []
    for (prefix, continuation), scores in zip(pairs[:-1], batched[:-1], strict=True):
        alone = local_backend.prompt_logprobs([*prefix, *continuation], top_k=1)
        expected = [alone[len(prefix) + i][token] for i, token in enumerate(continuation)]
        differences += [abs(a - b) for a, b in zip(scores, expected, strict=True)]
        assert all(score <= 0 for score in scores)
    print(f"continuation_logprobs: max |batched - alone| = {max(differences):.2e}")
    assert max(differences) < TOLERANCE

    # Cut into one-sequence chunks (each longer than the limit), the answer is the same.
    monkeypatch.setattr(local_backend, "max_batch_tokens", 1)
    monkeypatch.setattr(local_backend, "max_scored_rows", 2)
    chunked = local_backend.continuation_logprobs(pairs)
    assert max(abs(a - b) for x, y in zip(batched, chunked, strict=True) for a, b in zip(x, y, strict=True)) < TOLERANCE


@pytest.mark.model
def test_local_scoring_rejects_bad_ids(local_backend):
    assert local_backend.next_token_logprobs([], [1]) == []
    with pytest.raises(BackendError):
        local_backend.next_token_logprobs([[]], [1])
    with pytest.raises(BackendError, match="Candidate"):
        local_backend.next_token_logprobs([[1]], [10**9])
    with pytest.raises(BackendError):
        local_backend.continuation_logprobs([([], [1])])
    with pytest.raises(BackendError):
        local_backend.continuation_logprobs([([1], [-1])])
