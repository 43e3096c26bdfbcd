"""Sampled text through `Backend.rollouts`, for callers that want answers rather than tokens (ATD's candidates,
AED's replay policy)."""

from .base import Backend


def sampled_texts(backend: Backend, prompts: list[list[int]], *, seeds: list[int | None], max_tokens: int,
                  temperature: float) -> list[str]:
    """One sampled answer's text per prompt, in the order of `prompts`, from one batched rollout with a seed per
    row: `generate` seeds every row of a vLLM request alike, so the same prompt twice would get the same answer.
    A stopped answer's end token is not part of its text."""
    texts = [""] * len(prompts)
    for index, steps in backend.rollouts(prompts, max_tokens=max_tokens, temperature=temperature, seeds=seeds,
                                         top_k=1):
        ids = [step.token_id for step in steps]
        if steps and steps[-1].finish_reason == "stop":
            ids.pop()
        texts[index] = backend.detokenize(ids) if ids else ""
    return texts
