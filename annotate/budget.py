"""A node's token budget, checked when the operator that makes it is asked, not when its stream fails.

A response the model is to write reads a prompt: the node's rendered conversation, plus the response so far when
it continues one. That prompt must be at most the project's `max_prompt_tokens`, and with the tokens its stream
may write it must fit the model's context (dataplatform/inference/budget.py; the backend checks it again before
its forward pass). A prompt over either is refused with PromptTooLong (400), saying what made it long: a tool's
result, an edited argument, a typed rewrite, many rounds. Operators check it outside the session's lock: rendering
and tokenizing are backend calls.
"""

import json
from dataclasses import dataclass, replace

from django.conf import settings
from django.utils.translation import gettext as _

from dataplatform.conversations.model import Conversation
from dataplatform.inference import PromptTooLong
from dataplatform.inference.budget import over_context

from .models import AnnotationConfig, Node


def stream_tokens(node: Node, config: AnnotationConfig) -> int:
    """How many tokens one stream request may add to the node: what is left of its budget, at most
    ANNOTATE_STREAM_MAX_TOKENS (a forward pass each, in the web process with the local backend)."""
    left = (node.max_tokens or config.max_tokens) - len(node.token_ids)
    return max(0, min(left, settings.ANNOTATE_STREAM_MAX_TOKENS))


def refusal(tokens: int, *, config: AnnotationConfig, backend, max_tokens: int) -> PromptTooLong | None:
    """Why a prompt of `tokens` ids, asking for `max_tokens` more, may not be sent (None: it may)."""
    if tokens > config.max_prompt_tokens:
        return PromptTooLong(_("The prompt is %(tokens)s tokens, over this project's limit of %(limit)s "
                               "(max_prompt_tokens in its settings).")
                             % {"tokens": f"{tokens:,}", "limit": f"{config.max_prompt_tokens:,}"},
                             tokens=tokens, limit=config.max_prompt_tokens)
    return over_context(tokens, context=getattr(backend, "context_length", None), max_tokens=max_tokens)


def check_node(node: Node, *, config: AnnotationConfig, backend) -> None:
    """Refuse to stream `node` when what the model would read is over budget (no cause: for a node made
    before this check, or by an import)."""
    if (refused := refusal(len(node.prompt_ids) + len(node.token_ids), config=config, backend=backend,
                           max_tokens=stream_tokens(node, config))) is not None:
        raise refused


@dataclass(frozen=True)
class Part:
    """A piece of a conversation, with its size: the message (or tool schema) it is in, and which kind."""

    label: str
    tokens: int
    message: int | None = None  # index into the conversation's messages; None for a tool schema
    call: int | None = None  # index into the message's tool calls, for a call's arguments


def _label(message, index: int) -> str:
    where = f"messages[{index}]"
    if message.role == "tool":
        return _("the tool result of call %(id)s (%(name)s, %(where)s)") % {
            "id": message.tool_call_id or "?", "name": message.name or "?", "where": where}
    return _("the %(role)s message %(where)s") % {"role": message.role, "where": where}


def _texts(conversation: Conversation):
    """(part, text) of every text the model reads: each message's content and reasoning, each call's arguments."""
    for index, message in enumerate(conversation.messages):
        yield Part(_label(message, index), 0, index), message.content
        where = f"messages[{index}]"
        if message.reasoning:
            yield Part(_("the reasoning of %(where)s") % {"where": where}, 0, index), message.reasoning
        for number, call in enumerate(message.tool_calls):
            yield Part(_("the arguments of tool call %(id)s (%(name)s, %(where)s)")
                       % {"id": call.id, "name": call.name, "where": where}, 0, index, number), call.arguments


def largest_part(conversation: Conversation, backend) -> Part:
    """The conversation's longest piece of text in tokens: a message's content or reasoning, a tool call's
    arguments, a tool's result or schema. Tokenized once more, only when a prompt is refused."""
    parts = [replace(part, tokens=len(backend.tokenize(text)) if text else 0) for part, text in _texts(conversation)]
    for tool in conversation.tools:
        name = (tool.get("function") or {}).get("name", "?") if isinstance(tool, dict) else "?"
        parts.append(Part(_("the schema of tool %(name)s") % {"name": name},
                          len(backend.tokenize(json.dumps(tool, ensure_ascii=False)))))
    return max(parts, key=lambda part: part.tokens)


def conversation_cause(conversation: Conversation, part: Part) -> str:
    rounds = sum(message.role == "user" for message in conversation.messages)
    return _("It has %(messages)s messages in %(rounds)s rounds; the longest part is %(part)s: %(tokens)s tokens.") % {
        "messages": len(conversation.messages), "rounds": rounds, "part": part.label, "tokens": f"{part.tokens:,}"}


def precheck_turn(conversation: Conversation, *, config: AnnotationConfig, backend, field_of=None) -> None:
    """Before the conversation is rendered: a conversation so long in characters that it cannot fit the project's
    budget whatever its tokens is refused untokenized (tokenizing megabytes takes seconds of the web process).
    A token spells at most `backend.max_token_bytes` bytes and a character is at least one, so a text of n
    characters is at least n / max_token_bytes tokens; every chat template writes each text whole. The refusal
    names the longest text, whose field the API answer names."""
    widest = getattr(backend, "max_token_bytes", None)
    if not widest:
        return
    texts = list(_texts(conversation))
    total = sum(len(text) for _, text in texts)
    if total <= config.max_prompt_tokens * widest:
        return
    part, text = max(texts, key=lambda pair: len(pair[1]))
    at_least = -(-total // widest)
    refused = PromptTooLong(_("The prompt is at least %(tokens)s tokens, over this project's limit of "
                              "%(limit)s (max_prompt_tokens in its settings).")
                            % {"tokens": f"{at_least:,}", "limit": f"{config.max_prompt_tokens:,}"},
                            tokens=at_least, limit=config.max_prompt_tokens)
    cause = _("Alone, %(part)s is %(chars)s characters: at least %(tokens)s tokens.") % {
        "part": part.label, "chars": f"{len(text):,}", "tokens": f"{-(-len(text) // widest):,}"}
    raise refused.because(cause, field=field_of(part) if field_of else None)


def check_turn(prompt_ids: list[int], conversation: Conversation, *, config: AnnotationConfig, backend,
               field_of=None) -> None:
    """Refuse a new turn (or tree) whose rendered prompt is over budget, naming its longest part. `field_of(part)`:
    the request field that part came from, if any (an API answer names it)."""
    refused = refusal(len(prompt_ids), config=config, backend=backend,
                      max_tokens=min(config.max_tokens, settings.ANNOTATE_STREAM_MAX_TOKENS))
    if refused is not None:
        part = largest_part(conversation, backend)
        raise refused.because(conversation_cause(conversation, part), field=field_of(part) if field_of else None)


def check_continuation(child: Node, *, config: AnnotationConfig, backend, kept: int, typed: int = 0,
                       scored: int = 0, field: str | None = None) -> None:
    """Refuse a correction's child that reads more than the budget: the conversation, the `kept` tokens of the
    response, the `typed` tokens of a rewrite (`field`), then the tokens it streams or the `scored` tokens
    after an edited span (scoring reads them all and writes nothing)."""
    prompt = len(child.prompt_ids)
    reads = prompt + kept + typed + scored
    refused = refusal(reads, config=config, backend=backend,
                      max_tokens=1 if scored or child.status != "streaming" else stream_tokens(child, config))
    if refused is None:
        return
    pieces = [_("the conversation before the response, %(n)s tokens") % {"n": f"{prompt:,}"},
              _("the response before the change, %(n)s") % {"n": f"{kept:,}"}]
    if typed:
        pieces.append(_("the text typed, %(n)s") % {"n": f"{typed:,}"})
    if scored:
        pieces.append(_("the response after the edited span, %(n)s") % {"n": f"{scored:,}"})
    cause = _("It reads %(pieces)s.") % {"pieces": "; ".join(pieces)}
    # The typed text is named as the field when it is the longest of them.
    raise refused.because(cause, field=field if typed and typed >= max(prompt, kept, scored) else None)
