"""`VllmBackend`'s batched scoring: the next-token logprobs of chosen tokens, and the logprobs of given continuations.

Next-token scoring asks vLLM for the candidates themselves. With `logprob_token_ids` (vLLM 0.34's CompletionRequest,
vllm/entrypoints/openai/completion/protocol.py) and `max_tokens` 1, the logprobs of the one generated position are
the sampled token's and every listed id's, all of them, whatever `logprobs` says (`completion_top_logprobs_limit`,
vllm/entrypoints/generate/base/serving.py). They are raw logprobs (vLLM's default `--logprobs-mode`), what
`prompt_logprobs` reports for the same token after the same prompt. A batch of prompts goes in one request, as a
list: vLLM answers each prompt as a choice of its own (`index` its place in the list) with its own logprobs, and
schedules them together. Each prompt costs one prefill, and vLLM's prefix cache (on by default) serves what the
prompts share.

Continuations, and next-token scoring on a server without `logprob_token_ids`, read `prompt_logprobs`: each
(prompt, candidate) pair is a sequence of its own, scored at the candidate's position. vLLM reads no prefix cache for
such a request (SamplingParams.__post_init__ sets `skip_reading_prefix_cache` when `prompt_logprobs` is set,
vllm/sampling_params.py, and Request.get_prefix_cache_hit_limit then allows 0 cached tokens, vllm/v1/request.py;
0.34.0): every sequence is a whole prefill, so n candidates cost n prefills of each prompt.

An older vLLM ignores the unknown field (its OpenAIBaseModel allows extra fields and only logs them) and answers
without the candidates; that answer is detected, the batch is scored the older way, and the client remembers it
(`VllmBackend.answers_logprob_token_ids`), so that the probe costs one request per client.
"""

import logging
from typing import Any

from .base import BackendError
from .budget import check_prompts
from .vllm_wire import id_of_key, sampling_fields

logger = logging.getLogger(__name__)

# The most `logprob_token_ids` vLLM takes in one request (MAX_LOGPROB_TOKEN_IDS, vllm/sampling_params.py; a longer
# list is refused with a 400). It does not depend on --max-logprobs: vLLM drops `logprobs` from the sampling
# parameters of a request with `logprob_token_ids` (CompletionRequest.to_sampling_params), and checks only this cap.
MAX_LOGPROB_TOKEN_IDS = 128


def next_token_logprobs(backend, prompts: list[list[int]], candidates: list[int]) -> list[dict[int, float]]:
    """For each prompt, the logprob of each candidate as the token after it."""
    candidates = list(dict.fromkeys(int(c) for c in candidates))
    if any(not ids for ids in prompts):
        raise BackendError("Each prompt must be a non-empty list of token ids.")
    if not candidates or not prompts:
        return [{} for _ in prompts]
    if backend.answers_logprob_token_ids is not False and len(candidates) <= MAX_LOGPROB_TOKEN_IDS:
        scores = _by_logprob_token_ids(backend, prompts, candidates)
        backend.answers_logprob_token_ids = scores is not None
        if scores is not None:
            return scores
        logger.warning("vLLM at %s answered without the `logprob_token_ids` it was sent (older than 0.34?): "
                       "next-token scoring sends one sequence per candidate with `prompt_logprobs` from now on.",
                       backend._server)
    return _by_prompt_logprobs(backend, prompts, candidates)


def continuation_logprobs(backend, pairs: list[tuple[list[int], list[int]]]) -> list[list[float]]:
    """For each (prefix, continuation), the logprob of each continuation token after the prefix and the tokens
    before it ([] for an empty continuation)."""
    if any(not prefix for prefix, _ in pairs):
        raise BackendError("Each prefix must be a non-empty list of token ids.")
    results: list[list[float]] = [[] for _ in pairs]
    scored = [i for i, (_, continuation) in enumerate(pairs) if continuation]
    sequences = [[*pairs[i][0], *pairs[i][1]] for i in scored]
    positions = [list(range(len(pairs[i][0]), len(sequence))) for i, sequence in zip(scored, sequences, strict=True)]
    for i, row in zip(scored, _score(backend, sequences, positions), strict=True):
        results[i] = row
    return results


def scoring_payload(backend, prompts: list[list[int]], **fields: Any) -> dict[str, Any]:
    """The /v1/completions body of every scoring request, with `fields` for the kind of scores it asks for: the one
    place a field every scoring request sends belongs."""
    return {
        "model": backend.model_id,
        "prompt": [list(map(int, ids)) for ids in prompts],
        "max_tokens": 1,  # vLLM must generate something; only the logprobs are read
        **sampling_fields(temperature=0),
        **fields,
    }


def _by_logprob_token_ids(backend, prompts: list[list[int]], candidates: list[int]) -> list[dict[int, float]] | None:
    """One request per `max_batch_sequences` prompts; None as soon as an answer lacks a candidate (a server that
    ignored `logprob_token_ids`)."""
    check_prompts([len(ids) for ids in prompts], context=backend.context_length)  # and the one generated token
    results: list[dict[int, float]] = []
    for start in range(0, len(prompts), backend.max_batch_sequences):
        chunk = prompts[start:start + backend.max_batch_sequences]
        # `logprobs` must be set with `logprob_token_ids` (vLLM refuses the request otherwise); 0 asks a server that
        # ignores the list for the sampled token alone, the cheapest answer that shows the candidates missing.
        payload = scoring_payload(backend, chunk, logprobs=0, logprob_token_ids=candidates,
                                  return_tokens_as_token_ids=True)
        with backend._request("POST", "/v1/completions", payload) as response:
            for choice in _choices(response.json(), len(chunk)):
                positions = (choice.get("logprobs") or {}).get("top_logprobs") or [None]
                first = {id_of_key(key): float(value) for key, value in (positions[0] or {}).items()}
                if any(candidate not in first for candidate in candidates):
                    return None
                results.append({candidate: first[candidate] for candidate in candidates})
    return results


def _by_prompt_logprobs(backend, prompts: list[list[int]], candidates: list[int]) -> list[dict[int, float]]:
    """Sends prompt + [candidate] for every (prompt, candidate) pair with `prompt_logprobs`: vLLM always reports
    the actual token of each prompt position, so the last entry holds the candidate's logprob."""
    sequences = [[*ids, c] for ids in prompts for c in candidates]
    rows = _score(backend, sequences, [[len(sequence) - 1] for sequence in sequences])
    width = len(candidates)
    return [dict(zip(candidates, (row[0] for row in rows[at:at + width]), strict=True))
            for at in range(0, len(rows), width)]


def _score(backend, sequences: list[list[int]], positions: list[list[int]]) -> list[list[float]]:
    """For each sequence, the prompt logprob of its own token at each of `positions`, one request per
    `max_batch_sequences` sequences."""
    results: list[list[float]] = []
    if sequences:
        check_prompts([len(ids) for ids in sequences], context=backend.context_length)
    for start in range(0, len(sequences), backend.max_batch_sequences):
        chunk = sequences[start:start + backend.max_batch_sequences]
        payload = scoring_payload(backend, chunk, prompt_logprobs=1)  # the top 1, and each position's own token
        with backend._request("POST", "/v1/completions", payload) as response:
            for choice, ids, wanted in zip(_choices(response.json(), len(chunk)), chunk,
                                           positions[start:start + len(chunk)], strict=True):
                entries = choice["prompt_logprobs"]
                if entries is None or len(entries) != len(ids):
                    raise BackendError(f"vLLM returned {len(entries or [])} prompt logprobs for {len(ids)} "
                                       f"prompt tokens (prompt {choice['index']}).")
                row = []
                for position in wanted:
                    entry = {id_of_key(key): value for key, value in (entries[position] or {}).items()}
                    if ids[position] not in entry:
                        raise BackendError(f"vLLM's prompt logprobs lack token {ids[position]} at position "
                                           f"{position} (prompt {choice['index']}).")
                    row.append(float(entry[ids[position]]["logprob"]))
                results.append(row)
    return results


def _choices(body: dict, prompts: int) -> list[dict]:
    """The choices of a completion of `prompts` prompts, one per prompt in their order (vLLM's `index`)."""
    choices = sorted(body["choices"], key=lambda choice: choice["index"])
    if [choice["index"] for choice in choices] != list(range(prompts)):
        raise BackendError(f"vLLM returned choices {[c['index'] for c in choices]} for {prompts} prompts.")
    return choices
