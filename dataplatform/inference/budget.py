"""Every model call has a token budget: a prompt the model cannot take is refused before any forward pass.

A prompt's ids plus the tokens asked for its answer (`max_tokens`; at least 1, since scoring also makes
vLLM generate one) must fit the model's context: `max_position_embeddings` for the local model,
`max_model_len` from vLLM's GET /v1/models, either lowered by the MODEL_MAX_CONTEXT_TOKENS setting. Past
it, a forward pass either fails inside the model or, on the CPU model, runs for minutes with gigabytes of
attention first (issue 37: a 2,000,000-character tool argument held a web worker at 6 GB for 18 minutes).
Callers that know what made a prompt long (a tool result, a typed correction) add it with `because`.
"""

from collections.abc import Iterable, Iterator

from django.conf import settings
from django.utils.translation import gettext

from .base import PromptTooLong


def context_limit(own: int | None) -> int | None:
    """The model's context (None: unknown), lowered to MODEL_MAX_CONTEXT_TOKENS when that is set (0: not set)."""
    lowered = int(getattr(settings, "MODEL_MAX_CONTEXT_TOKENS", 0) or 0)
    if lowered > 0:
        return lowered if own is None else min(own, lowered)
    return own


def over_context(tokens: int, *, context: int | None, max_tokens: int = 1) -> PromptTooLong | None:
    """The refusal of a prompt of `tokens` ids that asks for `max_tokens` more, or None when it fits."""
    wanted = max(1, max_tokens)
    if context is None or tokens + wanted <= context:
        return None
    return PromptTooLong(
        gettext("The prompt is %(tokens)s tokens; with %(response)s for the response that makes %(total)s, over "
                "the model's context of %(limit)s tokens.")
        % {"tokens": f"{tokens:,}", "response": f"{wanted:,}", "total": f"{tokens + wanted:,}",
           "limit": f"{context:,}"},
        tokens=tokens, limit=context - wanted)


def check_prompt(tokens: int, *, context: int | None, max_tokens: int = 1, which: str = "") -> None:
    """Raise PromptTooLong unless a prompt of `tokens` ids and `max_tokens` more fit `context`. `which` names the
    prompt in a batch ("prompt 3 of 8")."""
    refusal = over_context(tokens, context=context, max_tokens=max_tokens)
    if refusal is not None:
        raise refusal.because(which) if which else refusal


def check_prompts(lengths: list[int], *, context: int | None, max_tokens: int = 1) -> None:
    """`check_prompt` for every prompt of a batch that runs as one (scoring, `generate`): the first one over
    refuses the call, named by its place in the batch."""
    for index, length in enumerate(lengths):
        check_prompt(length, context=context, max_tokens=max_tokens,
                     which=gettext("(prompt %(number)s of %(count)s)") % {"number": index + 1, "count": len(lengths)})


def refused_prompts(lengths: list[int], *, context: int | None, max_tokens: int) -> dict[int, PromptTooLong]:
    """For a batch whose prompts succeed or fail one by one (`rollouts`): the refusal of each prompt over the
    context, by index; the others run."""
    refusals = {}
    for index, length in enumerate(lengths):
        if (refusal := over_context(length, context=context, max_tokens=max_tokens)) is not None:
            refusals[index] = refusal
    return refusals


def refusals_first(refused: dict[int, PromptTooLong], results: Iterable[tuple[int, object]],
                   sent: list[int] | None = None) -> Iterator[tuple[int, object]]:
    """`rollouts`' answers: the refused prompts first, then the others as they finish (`sent`: the index in the
    batch of each of them, when `results` counts only those). A generator, so that closing it early (a cancelled
    job) closes `results` too."""
    yield from refused.items()
    if sent is None:
        yield from results
        return
    try:
        for row, answer in results:
            yield sent[row], answer
    finally:
        getattr(results, "close", lambda: None)()
