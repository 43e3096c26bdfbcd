"""Continuing a node: the model generates the rest of a response from its exact token ids, token by token.

Each token is read by the response template as it comes, so the annotator sees its channel (reasoning,
content, a tool call's name or arguments) while it streams. A project's reasoning budget closes a
reasoning that runs too long: the template writes its closing marker and the model answers. With
auto-approve on, a response that ends with tool calls runs them and the next turn streams on.
"""

from collections.abc import Iterator
from dataclasses import dataclass

from django.db import close_old_connections, connection
from django.utils.translation import gettext as _

from dataplatform.conversations.templates import PENDING, REASONING
from dataplatform.inference import BackendError

from . import services
from .models import SESSION_STATUS_WORDS, Event, EventKind, Node, NodeStatus, Origin, SessionStatus
from .nodes import parse_into, template_of
from .services import AnnotationError, config_for, seed_for
from .turns import NextTurn, auto_run_tool_calls

SAVE_EVERY_TOKENS = 8  # a streaming node is saved this often, so a failure loses at most a few tokens
FIELDS = ["token_ids", "logprobs", "top", "origins", "candidate_ranks", "channels", "message", "status",
          "finish_reason"]


@dataclass(frozen=True)
class Streamed:
    """One token as it streams: its text once its character is whole (byte-level BPE splits characters),
    and its channel so far; `settled` gives earlier tokens whose channel is now known (they were pending)."""

    node_id: int
    index: int
    token_id: int
    text: str
    logprob: float | None
    origin: str
    channel: str
    settled: tuple[tuple[int, str], ...] = ()


class _Reader:
    """The node's tokens read by the template after every new one, with each token's piece kept, so a
    step costs one lookup and one scan of the response's bytes, not a tokenizer call over all of it."""

    def __init__(self, node: Node, template, backend):
        self.node, self.template, self.backend = node, template, backend
        self.pieces = backend.token_pieces(node.token_ids) if node.token_ids else []
        self.undecoded = b""

    def add(self, token_id: int) -> tuple[str, tuple[tuple[int, str], ...]]:
        """The new token's text (empty while its character is incomplete) and the tokens it settled."""
        piece = self.backend.token_pieces([token_id])[0]
        self.pieces.append(piece)
        before = self.node.channels
        parsed = self.template.parse(self.node.token_ids, backend=self.backend, pieces=self.pieces)
        self.node.channels, self.node.message = parsed.channels, parsed.message.as_dict()
        settled = tuple((index, channel) for index, (was, channel) in enumerate(zip(before, parsed.channels, strict=False))
                        if was != channel)
        self.undecoded += piece
        try:
            text, self.undecoded = self.undecoded.decode("utf-8"), b""
        except UnicodeDecodeError:  # not an error: the character's next bytes come with the next tokens
            text = ""
        return text, settled

    def reasoning_open(self) -> bool:
        message = self.node.message
        channels = [channel for channel in self.node.channels if channel != PENDING]
        return bool(channels) and channels[-1] == REASONING and not message.get("content") \
            and not message.get("tool_calls")


def continue_node(*, node: Node) -> Iterator[Streamed | NextTurn]:
    """Generate the rest of a streaming (or interrupted) node from its exact token ids, yielding each token;
    then, with auto-approve on, run its tool calls and stream the next turn, up to the session's step limit.

    The node is saved every few tokens and at the end; if the backend fails, the node keeps what it has,
    is marked interrupted, and the error propagates (retry = call again)."""
    while node is not None:
        yield from _continue_one(node)
        next_turn = auto_run_tool_calls(node=node)
        if next_turn is None:
            return
        yield next_turn
        node = next_turn.node


def _continue_one(node: Node) -> Iterator[Streamed]:
    session = node.session
    project = session.item.project
    config = config_for(project)
    if node.status == NodeStatus.COMPLETE:
        return
    if session.status != SessionStatus.OPEN:
        raise AnnotationError(_("The session is %(status)s; its responses no longer change.") % {
            "status": SESSION_STATUS_WORDS.get(session.status, session.status)})
    if node.status == NodeStatus.INTERRUPTED:
        Event.objects.create(session=session, kind=EventKind.CONTINUE_GENERATING, node=node, actor=None,
                             payload={"from_token": len(node.token_ids)})
    backend = services.backend_for(project)
    template = template_of(config, backend)
    reader = _Reader(node, template, backend)
    budget = node.max_tokens or config.max_tokens
    node.status = NodeStatus.STREAMING
    closes_reasoning = config.reasoning_budget and template.markers.reasoning
    try:
        while node.status == NodeStatus.STREAMING:
            remaining = budget - len(node.token_ids)
            if remaining <= 0:
                node.status, node.finish_reason = NodeStatus.COMPLETE, "length"
                break
            seed = seed_for(config, session.item, f"node:{node.pk}:{len(node.token_ids)}")
            steps = backend.stream(node.prompt_ids + node.token_ids, max_tokens=remaining,
                                   temperature=config.temperature, seed=seed, top_k=config.top_k)
            for step in _releasing_connection(steps):
                node.token_ids.append(step.token_id)
                node.logprobs.append(step.logprob)
                node.top.append([list(pair) for pair in step.top])
                node.origins.append(Origin.MODEL)
                node.candidate_ranks.append(None)
                text, settled = reader.add(step.token_id)
                if step.finish_reason:  # read and saved once, finished, after the loop
                    node.status, node.finish_reason = NodeStatus.COMPLETE, step.finish_reason
                elif len(node.token_ids) % SAVE_EVERY_TOKENS == 0:
                    node.save(update_fields=FIELDS)
                yield Streamed(node.pk, len(node.token_ids) - 1, step.token_id, text, step.logprob, Origin.MODEL,
                               node.channels[-1], settled)
                if closes_reasoning and not step.finish_reason and reader.reasoning_open() \
                        and node.channels.count(REASONING) >= config.reasoning_budget:
                    getattr(steps, "close", lambda: None)()  # cut here; the template closes the reasoning below
                    yield from _close_reasoning(node, reader, template, backend)
                    break
            else:
                if node.status == NodeStatus.STREAMING:  # the backend ended without a finish reason
                    node.status, node.finish_reason = NodeStatus.COMPLETE, "length"
    except BackendError:
        node.status = NodeStatus.INTERRUPTED
        node.save(update_fields=FIELDS)
        raise
    parse_into(node, template=template, backend=backend, pieces=reader.pieces)
    node.save(update_fields=FIELDS)


def _close_reasoning(node: Node, reader: _Reader, template, backend) -> Iterator[Streamed]:
    """The reasoning ran past the project's budget: the template's closing marker, as its own tokens."""
    closing = "\n" + template.markers.reasoning[1] + "\n\n"
    for token_id in backend.tokenize(closing):
        node.token_ids.append(token_id)
        node.logprobs.append(None)
        node.top.append([])
        node.origins.append(Origin.TEMPLATE)
        node.candidate_ranks.append(None)
        text, settled = reader.add(token_id)
        yield Streamed(node.pk, len(node.token_ids) - 1, token_id, text, None, Origin.TEMPLATE, node.channels[-1],
                       settled)
    node.save(update_fields=FIELDS)


def _releasing_connection(steps: Iterator) -> Iterator:
    """The backend's steps, with the database connection handed back before each one is computed.

    A step waits for the model (one forward pass at a time per process) behind every other stream, for
    seconds under load. Holding a pooled connection meanwhile, 20 streams took the whole pool and every
    other request waited for one and failed (503). Outside a transaction only: inside one (a test, a
    caller's atomic block) the connection must stay.
    """
    while True:
        if not connection.in_atomic_block:
            close_old_connections()  # pooled (CONN_MAX_AGE 0): back to the pool; the next save takes one again
        step = next(steps, None)
        if step is None:
            return
        yield step
