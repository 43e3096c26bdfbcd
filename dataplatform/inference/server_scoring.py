"""vLLM's `logprob_token_ids` on the embedded model server (server.py): the logprobs of chosen token ids at each
generated position, as vLLM 0.34 answers them on /v1/completions.

vLLM checks the list before any forward pass (CompletionRequest.check_logprobs, vllm/entrypoints/openai/completion/
protocol.py; SamplingParams._validate_logprobs, vllm/sampling_params.py) and answers, at each generated position, the
sampled token and every listed id, whatever `logprobs` says: the list replaces the top k
(`completion_top_logprobs_limit`, vllm/entrypoints/generate/base/serving.py). Its logprobs are raw, the full
distribution's, clamped at -9999 as all of its completion logprobs are.
"""

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from .base import TokenStep

# vLLM's MAX_LOGPROB_TOKEN_IDS (vllm/sampling_params.py): the most ids one request may list, whatever --max-logprobs.
MAX_LOGPROB_TOKEN_IDS = 128
LOWEST_LOGPROB = -9999.0  # what vLLM sends for -inf, which JSON cannot carry


def logprob_token_ids(body: dict, vocab_size: int, bad_request: type[Exception]) -> list[int]:
    """The request's `logprob_token_ids`, checked as vLLM checks them ([] when not asked: vLLM reads an empty list as
    none); `bad_request(message, param)` is raised for a list vLLM refuses."""
    ids: Any = body.get("logprob_token_ids")
    if not ids:
        return []
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise bad_request("`logprob_token_ids` must be a list of token ids (integers).", "logprob_token_ids")
    if body.get("logprobs") is None:
        raise bad_request("when using `logprob_token_ids`, `logprobs` must be set.", "logprob_token_ids")
    if len(ids) > MAX_LOGPROB_TOKEN_IDS:
        raise bad_request(f"Requested logprob_token_ids of length {len(ids)}, which is greater than max allowed: "
                          f"{MAX_LOGPROB_TOKEN_IDS}", "logprob_token_ids")
    if invalid := [i for i in ids if not 0 <= i < vocab_size]:
        raise bad_request(f"token_id(s) {invalid} in logprob_token_ids contain out-of-vocab token ids. Vocabulary "
                          f"size: {vocab_size}", "logprob_token_ids")
    if body.get("structured_outputs") is not None:
        # vLLM would report the masked distribution's logprobs (-9999 for a token the constraint forbids); the
        # scores below are the unmasked model's. Refused rather than answered wrong; the platform never sends both.
        raise bad_request("The embedded model server does not support `logprob_token_ids` with `structured_outputs`; "
                          "use vLLM.", "logprob_token_ids")
    return ids


def with_candidates(backend, prompt_ids: list[int], steps: Iterator[TokenStep], ids: list[int]) -> Iterator[TokenStep]:
    """`steps`, each with `top` replaced by the listed ids' logprobs at its position (scored on the prompt and the
    tokens generated before it): the alternatives vLLM answers instead of the top k."""
    prefix = list(prompt_ids)
    for step in steps:
        [scores] = backend.next_token_logprobs([prefix], ids)
        yield replace(step, top=[(i, max(scores[i], LOWEST_LOGPROB)) for i in ids])
        prefix.append(step.token_id)
