"""The model backend interface. It speaks token ids, never re-tokenized text:
a correction must continue from exactly the prefix the annotator saw."""

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from django.utils.translation import gettext

from dataplatform.errors import Refused, Transient, Unavailable


class BackendError(Unavailable):
    """A backend call failed in a way that retrying will not fix (bad input, a bug, a model it does not
    serve). To the request that needed the model it is a 503 all the same."""

    @property
    def detail(self) -> str:
        return gettext("The model backend failed: %(error)s") % {"error": self}


class BackendUnavailable(BackendError, Transient):
    """The backend could not be reached: connection refused, timeout, or a 5xx. Worth retrying."""


class PromptTooLong(Refused, BackendError):
    """A prompt longer than the model (or the caller's budget) takes, refused before any forward pass
    (budget.py). A 400: the same prompt is refused again. Also a BackendError, so that callers that turn a
    failed model call into a per-item error (a replay's run, an interrupted node) treat it as one; it is
    never retried (not Transient). `tokens`: the prompt's ids; `limit`: the most this call could take."""

    status = 400
    retry_after = None

    def __init__(self, message: str, *, tokens: int | None = None, limit: int | None = None,
                 field: str | None = None):
        super().__init__(message, field=field)
        self.tokens, self.limit = tokens, limit

    @property
    def detail(self) -> str:  # its own words, not BackendError's "The model backend failed: ..."
        return str(self)

    def because(self, cause: str, *, field: str | None = None) -> "PromptTooLong":
        """The same refusal with what made the prompt long said after it (and the input field it came from)."""
        return PromptTooLong(f"{self} {cause}".strip(), tokens=self.tokens, limit=self.limit,
                             field=field if field is not None else self.field)


@dataclass(frozen=True)
class TokenStep:
    token_id: int
    logprob: float
    # The top-k alternatives at this position as (token_id, logprob), best first.
    # The sampled token is always in it (appended if it was outside the top k, as vLLM does).
    top: list[tuple[int, float]] = field(default_factory=list)
    finish_reason: str | None = None  # "stop" (end-of-sequence token), "length" (max_tokens), or None


@dataclass(frozen=True)
class Generation:
    """One finished completion of a batch: the text (end token excluded) and why it stopped."""

    text: str
    token_ids: list[int]
    finish_reason: str  # "stop" or "length"


@dataclass(frozen=True)
class BackendHealth:
    ok: bool
    backend: str
    model_id: str
    detail: str = ""
    latency_ms: float | None = None


class Backend(Protocol):
    name: str
    model_id: str
    # The most tokens a call's prompt plus its answer may hold (None: unknown; the server then refuses). Every
    # model call below checks it before any forward pass and raises PromptTooLong (budget.py).
    context_length: int | None
    # The most bytes one token spells (None: unknown): a text of n characters is at least n / max_token_bytes
    # tokens, so a text far over a budget is refused without the seconds it takes to tokenize megabytes.
    max_token_bytes: int | None
    # Token ids that end a response (empty when the backend cannot tell).
    eos_token_ids: frozenset[int]

    def served_models(self) -> list[str]:
        """The model ids this backend's server serves now (a project may choose one of them)."""

    def chat_prompt_ids(self, messages: list[dict], *, tools: list[dict] | None = None,
                        continue_final_message: bool = False) -> list[int]:
        """Token ids of the model's own chat template applied to `messages` (and `tools`, for templates that
        render them), generation prompt added; or, with `continue_final_message`, the last message (an
        assistant's, partial) left open for the model to continue, with no generation prompt."""

    def tokenize(self, text: str) -> list[int]:
        """Token ids of plain text, no special tokens added (for typed rewrites)."""

    def detokenize(self, ids: list[int]) -> str: ...

    def token_pieces(self, ids: list[int]) -> list[bytes]:
        """The raw bytes of each token, for display. A piece may be part of a UTF-8 character."""

    def stream(
        self, prompt_ids: list[int], *, max_tokens: int, temperature: float, seed: int | None, top_k: int
    ) -> Iterator[TokenStep]: ...

    def rollouts(
        self, prompts: list[list[int]], *, max_tokens: int, temperature: float, seeds: list[int | None], top_k: int
    ) -> Iterator[tuple[int, list[TokenStep]]]:
        """Complete many prompts with top-k logprobs at every position (what `stream` gives for one), yielding
        (index into `prompts`, steps) as each completion finishes, in whatever order they finish. A prompt over
        the context yields (index, PromptTooLong) in place of its steps, and the others still run.

        The batched path of rollout jobs: the local backend decodes the whole batch with one forward pass per
        step; vLLM keeps up to VLLM_MAX_CONCURRENCY requests in flight. At temperature 0 the tokens are those
        `stream` gives for each prompt alone. A caller saves each result as it arrives, so a killed worker loses
        at most what was in flight."""

    def prompt_logprobs(self, ids: list[int], *, top_k: int) -> list[dict[int, float] | None]:
        """Entry 0 is None; entry j scores ids[j] given ids[:j] (top-k plus ids[j] itself)."""

    def next_token_logprobs(self, prompts: list[list[int]], candidates: list[int]) -> list[dict[int, float]]:
        """For each prompt, {candidate: log P(candidate is the next token | prompt)}, in the order of `prompts`.

        A full softmax over the vocabulary (not renormalised over the candidates), for the whole batch
        at once: never one model call per prompt. Prompts must be non-empty."""

    def continuation_logprobs(self, pairs: list[tuple[list[int], list[int]]]) -> list[list[float]]:
        """For each (prefix, continuation), the logprob of each continuation token given the prefix and
        the continuation tokens before it, in the order of `pairs`.

        The whole batch at once. A prefix must be non-empty; an empty continuation scores as []."""

    # Whether `generate` constrains its output to `json_schema` or `choice` (constrained decoding: vLLM's
    # structured outputs, xgrammar on the local backend). Where false, both are ignored: the caller validates.
    supports_json_schema: bool

    def generate(
        self, prompts: list[list[int]], *, max_tokens: int, temperature: float, seed: int | None,
        json_schema: dict | None = None, choice: list[str] | None = None,
    ) -> list[Generation]:
        """Complete a batch of prompts together (one batch for the model, not one call each), in order.

        Where `supports_json_schema`, every answer of the batch is constrained: with `json_schema`, to JSON
        text valid against the schema; with `choice`, to exactly one of the strings (the bare string, not
        quoted). At most one of the two (BackendError otherwise). The end token is allowed only once the
        answer is complete, so an answer cut by `max_tokens` is incomplete and has finish_reason "length":
        the caller must check it. Where not `supports_json_schema`, both are ignored and the caller
        validates the text."""

    def generate_each(
        self, prompts: list[list[int]], *, max_tokens: int, temperature: float, seed: int | None,
        constraints: list[dict | None],
    ) -> list[Generation]:
        """`generate` with a constraint per row: each entry is None (unconstrained) or `generate`'s own keywords,
        {"json_schema": {...}} or {"choice": [...]} (BackendError for anything else), answers in row order. What a
        batch whose rows need different schemas calls (the labeler's stage two: each task's families). The local
        backend still decodes the whole batch at once; a backend whose requests take one constraint (vLLM) sends
        one `generate` per distinct constraint (`generate_by_constraint`). Where not `supports_json_schema`, the
        constraints are ignored as `generate` ignores them."""

    def health(self) -> BackendHealth: ...

