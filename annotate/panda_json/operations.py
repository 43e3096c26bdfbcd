"""Import, the operations: what the app's operation records say about a dialog's tokens, as our events.

A dialog that corrects another (its first operation names it as `parent`) forks at the first token
where their response ids differ, in any channel (reasoning, content, a tool call's arguments). The
operator says what the tokens from there are:

- `continue_with_chosen`: a top-k candidate (its rank read from the rejected token's top-k, in our
  shape `rejected_token.top_logprobs` with ids, or the app's `rejected_token.logprobs.content[0]
  .top_logprobs` with texts), or the app's `<|stop|>` item (`{"finish_reason": "stop"}`): a forced stop;
- `continue_with_input`: typed text (ending with `<|stop|>`, the platform's typed stop);
- `edit_selection`: typed text replacing a span, the rest kept;
- `continue_generating`: more of the parent, nothing changed;
- anything else on a child (`auto`, an off-policy edit): nothing says the model wrote what follows
  the fork, so it is recorded as typed.

A dialog that starts a tree is `generate_new` or `edit_prompt` (a new tree of the session), or
`run_tool_calls` / `start_new_round` (the next turn of the dialog it names).
"""

from django.utils.translation import gettext

from dataplatform.inference import Backend

from .. import corrections
from ..models import EventKind, Origin
from ..tokens import TokenSequence

TURNS = (EventKind.RUN_TOOL_CALLS, EventKind.START_NEW_ROUND)
TREES = (EventKind.GENERATE_NEW, EventKind.EDIT_PROMPT)


def root_operator(operation: dict) -> str:
    operator = operation.get("operator")
    if operator in TURNS + TREES:
        return operator
    return EventKind.EDIT_PROMPT if operation.get("is_prompt_modified") else EventKind.GENERATE_NEW


def _number(value) -> float | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def candidate_id(entry: dict, backend: Backend) -> int | None:
    """A top-k entry's token id: its `token_id`, else its text when that is one token."""
    if isinstance(entry.get("token_id"), int):
        return entry["token_id"]
    if isinstance(entry.get("token"), str) and entry["token"]:
        ids = backend.tokenize(entry["token"])
        return ids[0] if len(ids) == 1 else None
    return None


def top_entries(operation: dict) -> list[dict]:
    """The rejected position's top-k as the operation stores it (ours or the app's shape)."""
    rejected = operation.get("rejected_token")
    if not isinstance(rejected, dict):
        return []
    entries = rejected.get("top_logprobs")
    if not isinstance(entries, list):
        logprobs = rejected.get("logprobs")
        content = logprobs.get("content") if isinstance(logprobs, dict) else None
        first = content[0] if isinstance(content, list) and content and isinstance(content[0], dict) else {}
        entries = first.get("top_logprobs")
    return [entry for entry in entries if isinstance(entry, dict)] if isinstance(entries, list) else []


def top_of(operation: dict, backend: Backend) -> list[list]:
    """[[token_id, logprob], ...] at the fork, best first, for the entries whose id is known."""
    top, seen = [], set()
    for entry in top_entries(operation):
        token_id = candidate_id(entry, backend)
        if token_id is not None and token_id not in seen:
            seen.add(token_id)
            top.append([token_id, _number(entry.get("logprob"))])
    return top


def correction(spec, parent, operation: dict, backend: Backend, warnings: list[str]) -> tuple[str, dict]:
    """The event (kind, payload) that made `spec` from `parent`; sets the origins, top-k and lock of its tokens
    from the fork on."""
    tokens, parent_tokens = TokenSequence(spec), TokenSequence(parent)
    ids, fork = tokens.token_ids, spec.fork_index
    tail = len(ids) - fork
    rejected = parent_tokens[fork] if fork < len(parent_tokens) else None
    base = {"position": fork, "rejected_token_id": rejected.token_id if rejected else None,
            "channel": rejected.channel if rejected else None}
    operator = operation.get("operator")
    spec.locked_until = fork
    top = top_of(operation, backend)
    if top and rejected and not rejected.top:
        parent_tokens.set(fork, top=top)  # the parent's distribution there: candidate ranks survive on the parent too
    if operator == EventKind.CONTINUE_WITH_CHOSEN:
        chosen = operation.get("continue_with_chosen") if isinstance(operation.get("continue_with_chosen"), dict) \
            else {}
        if chosen.get("finish_reason") or not tail:  # the app's <|stop|> item: the response ends here
            return EventKind.FORCE_STOP, base | {"top_logprobs": top}
        candidates = [token_id for token_id, _ in top]
        rank = candidates.index(ids[fork]) + 1 if ids[fork] in candidates else (
            chosen.get("rank") if isinstance(chosen.get("rank"), int) else None)
        logprob = _number(chosen.get("logprob"))
        tokens.set(fork, origin=Origin.CANDIDATE, logprob=logprob, top=top, candidate_rank=rank)
        spec.locked_until = fork + 1
        return EventKind.CONTINUE_WITH_CHOSEN, base | {"token_id": ids[fork], "rank": rank, "logprob": logprob,
                                                       "top_logprobs": top}
    if operator == EventKind.CONTINUE_WITH_INPUT:
        typed_input = operation.get("continue_with_input")
        patch = typed_input.get("input_patch") if isinstance(typed_input, dict) else None
        patch = patch if isinstance(patch, str) else ""
        stop = patch.endswith(corrections.STOP_MARKER)
        typed = patch[: -len(corrections.STOP_MARKER)] if stop else patch
        if not typed and stop:
            return EventKind.FORCE_STOP, base
        count = _typed(spec, typed, backend)
        return EventKind.CONTINUE_WITH_INPUT, base | {"text": patch, "token_ids": ids[fork:fork + count], "stop": stop}
    if operator == EventKind.EDIT_SELECTION:
        text = operation.get("edit_selection_text") if isinstance(operation.get("edit_selection_text"), str) else ""
        count = _typed(spec, text, backend)
        replaced = operation.get("rejected_tokens_text")
        end = fork + (len(backend.tokenize(replaced)) if isinstance(replaced, str) and replaced else 1)
        return EventKind.EDIT_SELECTION, {"start": fork, "end": min(end, len(parent.token_ids)), "text": text,
                                          "token_ids": ids[fork:fork + count],
                                          "rejected_token_ids": parent_tokens.slice(fork, end).token_ids,
                                          "kept_tokens": tail - count, "channel": base["channel"]}
    if operator == EventKind.CONTINUE_GENERATING or fork == len(parent.token_ids):
        spec.locked_until = parent.locked_until
        return EventKind.CONTINUE_GENERATING, {"from_token": fork}
    warnings.append(gettext("dialog %(key)s: operator %(operator)s is imported as a typed rewrite")
                    % {"key": spec.key, "operator": repr(operator)})
    tokens.set(fork, len(ids), origin=Origin.TYPED)
    spec.locked_until = len(ids)
    return EventKind.CONTINUE_WITH_INPUT, base | {"text": backend.detokenize(ids[fork:]), "token_ids": ids[fork:],
                                                  "stop": False, "operator": operator}


def _typed(spec, typed: str, backend: Backend) -> int:
    """Mark the typed tokens after the fork and return how many: those that spell the typed text where it
    stands in the response (the app's patch may begin before the first differing token: "Tw" typed over
    "Three" forks at "w"), else as many as the typed text alone makes; at most the tail."""
    tokens = TokenSequence(spec)
    fork, ids = spec.fork_index, tokens.token_ids
    tail = len(ids) - fork
    count = min(len(backend.tokenize(typed)) if typed else 0, tail)
    if typed:
        text, offsets = "", []
        for piece in backend.token_pieces(ids):
            offsets.append(len(text))
            text += piece.decode("utf-8", errors="replace")
        before = offsets[fork] if fork < len(offsets) else len(text)
        start = next((at for at in range(max(0, before - len(typed)), before + 1) if text.startswith(typed, at)), None)
        if start is not None:
            end = start + len(typed)
            count = sum(1 for offset in offsets[fork:] if offset < end)
    tokens.set(fork, fork + count, origin=Origin.TYPED)
    spec.locked_until = fork + count
    return count
