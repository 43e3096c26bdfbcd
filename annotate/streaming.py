"""Continuing a node: the model generates the rest of a response from its exact token ids, token by token.

Each token is read by the response template as it comes, so the annotator sees its channel (reasoning,
content, a tool call's name or arguments) while it streams. A project's reasoning budget closes a
reasoning that runs too long: the template writes its closing marker and the model answers. With
auto-approve on, a response that ends with tool calls runs them and the next turn streams on.

One request streams a node at a time. It takes the node's lease (`Node.stream_lease`) before it starts and
renews it at every save; it saves only while the lease is the one it set. A stream that ends without finishing
(the backend failed, the client left, an error) leaves the node interrupted, and streaming it again resumes
it. A request that finds the lease held gets a 409, unless the lease is older than
ANNOTATE_STREAM_LEASE_SECONDS (the worker that held it was killed): then it takes the stream over. Its
annotator may also cancel the stream (`cancel_stream`): the node keeps what was saved and is interrupted;
a stream still running stops at its next save.

Each request adds at most ANNOTATE_STREAM_MAX_TOKENS tokens (budget.stream_tokens): with the local backend
every token is a forward pass in the web process, so one request's work stays bounded; a response that
reaches the cap ends with `length`, and continuing it goes on.
"""

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from dataplatform.conversations.templates import PENDING, REASONING
from dataplatform.errors import Conflict, Missing
from dataplatform.inference import backend_for

from . import budget
from .errors import AnnotationError
from .locking import SessionLock, bump
from .models import SESSION_STATUS_WORDS, Event, EventKind, Node, NodeStatus, Origin, Session, SessionStatus
from .nodes import parse_into, template_of
from .services import config_for, seed_for
from .tokens import TokenSequence
from .turns import NextTurn, auto_run_tool_calls

logger = logging.getLogger(__name__)

SAVE_EVERY_TOKENS = 8  # a streaming node is saved this often, so a failure loses at most a few tokens
FIELDS = ["token_ids", "logprobs", "top", "origins", "candidate_ranks", "channels", "message", "status",
          "finish_reason"]


class StreamBusy(Conflict):
    """Another request streams this node now."""


class StreamTakenOver(AnnotationError):
    """The node's stream was cancelled, or taken over after its lease ran out, while this request streamed it."""


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
        self.tokens = TokenSequence(node)
        self.pieces = backend.token_pieces(node.token_ids) if node.token_ids else []
        self.undecoded = b""

    def add(self, token_id: int, *, origin: str, logprob: float | None = None, top=()) -> tuple[
            str, tuple[tuple[int, str], ...]]:
        """Add a token to the node; its text (empty while its character is incomplete) and the tokens it settled."""
        before = list(self.node.channels)  # the earlier tokens' channels, before this one's parse
        self.tokens.append(token_id, origin=origin, logprob=logprob, top=top)
        piece = self.backend.token_pieces([token_id])[0]
        self.pieces.append(piece)
        parsed = self.template.parse(self.node.token_ids, backend=self.backend, pieces=self.pieces)
        self.tokens.set_channels(parsed.channels)
        self.node.message = parsed.message.as_dict()
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


# --- who streams a node ------------------------------------------------------------------------------

def claim_stream(node: Node) -> bool:
    """Take the node's stream for this request (False: it is complete, nothing to stream).

    Refused when the session is closed, when what the model would read is over the token budget (a node made
    before the operators checked it, or imported), and with a 409 while another request holds a live lease. A
    node taken from an interrupted (or dead) stream records that it resumes. Call it outside a transaction:
    the budget check may ask the backend."""
    session = node.session
    if node.status == NodeStatus.COMPLETE:
        return False
    if session.status != SessionStatus.OPEN:
        raise AnnotationError(_("The session is %(status)s; its responses no longer change.") % {
            "status": SESSION_STATUS_WORDS.get(session.status, session.status)})
    project = session.item.project
    config = config_for(project)
    budget.check_node(node, config=config, backend=backend_for(project, model=config.model_name))
    now = timezone.now()
    expired = now - timedelta(seconds=settings.ANNOTATE_STREAM_LEASE_SECONDS)
    free = Q(stream_lease__isnull=True) | Q(stream_lease__lt=expired)
    resumes = node.status == NodeStatus.INTERRUPTED or node.stream_lease is not None
    if not Node.objects.filter(free, pk=node.pk).exclude(status=NodeStatus.COMPLETE).update(
            stream_lease=now, status=NodeStatus.STREAMING):
        node.refresh_from_db(fields=["status", "stream_lease"])
        if node.status == NodeStatus.COMPLETE:
            return False
        raise StreamBusy(_("This response is being written in another request (another tab?). Wait for it, or "
                           "cancel it."))
    node.refresh_from_db(fields=[*FIELDS, "stream_lease"])  # what a stream before this one saved last
    if resumes:
        Event.objects.create(session=session, kind=EventKind.CONTINUE_GENERATING, node=node, actor=None,
                             payload={"from_token": len(node.token_ids)})
    node.claimed = True
    return True


def _save(node: Node, *, final: bool = False) -> None:
    """Save the stream's progress and renew its lease (`final`: give it up), if it still holds it."""
    lease = None if final else timezone.now()
    values = {name: getattr(node, name) for name in FIELDS}
    if not Node.objects.filter(pk=node.pk, stream_lease=node.stream_lease).update(stream_lease=lease, **values):
        raise StreamTakenOver(_("The response was cancelled, or another request took it over; what was saved "
                                "before is kept."))
    node.stream_lease = lease


def cancel_stream(*, session: Session, version: int, node_id: int, actor) -> Session:
    """End a node's stream at its annotator's word: the node keeps the tokens saved so far and is interrupted
    (continue it later, or select, undo, correct). A stream still running stops at its next save."""
    with SessionLock(session.pk, version).write() as session:
        node = session.nodes.select_for_update().filter(pk=node_id).first()
        if node is None:
            raise Missing(_("No such node in this session."))
        if node.status == NodeStatus.COMPLETE:
            raise AnnotationError(_("This response is complete: there is no stream to cancel."))
        node.status, node.stream_lease = NodeStatus.INTERRUPTED, None
        node.save(update_fields=["status", "stream_lease"])
        bump(session)
        Event.objects.create(session=session, kind=EventKind.CANCEL_STREAM, node=node, actor=actor,
                             payload={"tokens": len(node.token_ids)})
    return session


# --- streaming ------------------------------------------------------------------------------------------

def continue_node(*, node: Node) -> Iterator[Streamed | NextTurn]:
    """Generate the rest of a streaming (or interrupted) node from its exact token ids, yielding each token;
    then, with auto-approve on, run its tool calls and stream the next turn, up to the session's step limit.

    The node is saved every few tokens and at the end; if the stream stops before the end (the backend
    fails, the client leaves, any error), the node keeps what it has, is marked interrupted, and the error
    propagates (retry = call again)."""
    while node is not None:
        yield from _continue_one(node)
        next_turn = auto_run_tool_calls(node=node)
        if next_turn is None:
            return
        yield next_turn
        node = next_turn.node


def _continue_one(node: Node) -> Iterator[Streamed]:
    if not getattr(node, "claimed", False) and not claim_stream(node):
        return
    node.claimed = False  # once: a retry of the same object claims again
    session = node.session
    project = session.item.project
    config = config_for(project)
    # This request's share of the response's budget (budget.stream_tokens: ANNOTATE_STREAM_MAX_TOKENS at most).
    until = len(node.token_ids) + budget.stream_tokens(node, config)
    node.status = NodeStatus.STREAMING
    try:
        backend = backend_for(project, model=config.model_name)
        template = template_of(config, backend)
        reader = _Reader(node, template, backend)
        closes_reasoning = config.reasoning_budget and template.markers.reasoning
        while node.status == NodeStatus.STREAMING:
            remaining = until - len(node.token_ids)
            if remaining <= 0:
                node.status, node.finish_reason = NodeStatus.COMPLETE, "length"
                break
            seed = seed_for(config, session.item, f"node:{node.pk}:{len(node.token_ids)}")
            steps = backend.stream(node.prompt_ids + node.token_ids, max_tokens=remaining,
                                   temperature=config.temperature, seed=seed, top_k=config.top_k)
            for step in _releasing_connection(steps):
                text, settled = reader.add(step.token_id, origin=Origin.MODEL, logprob=step.logprob, top=step.top)
                if step.finish_reason:  # read and saved once, finished, after the loop
                    node.status, node.finish_reason = NodeStatus.COMPLETE, step.finish_reason
                elif len(node.token_ids) % SAVE_EVERY_TOKENS == 0:
                    _save(node)
                yield Streamed(node.pk, len(node.token_ids) - 1, step.token_id, text, step.logprob, Origin.MODEL,
                               reader.tokens[-1].channel, settled)
                if closes_reasoning and not step.finish_reason and reader.reasoning_open() \
                        and node.channels.count(REASONING) >= config.reasoning_budget:
                    getattr(steps, "close", lambda: None)()  # cut here; the template closes the reasoning below
                    yield from _close_reasoning(node, reader, template, backend)
                    break
            else:
                if node.status == NodeStatus.STREAMING:  # the backend ended without a finish reason
                    node.status, node.finish_reason = NodeStatus.COMPLETE, "length"
        parse_into(node, template=template, backend=backend, pieces=reader.pieces)
        _save(node, final=True)
    except BaseException as stopped:  # the backend failed, the client left (GeneratorExit), a bug...
        if not isinstance(stopped, StreamTakenOver):
            _interrupt(node)
        raise


def _interrupt(node: Node) -> None:
    """The stream stopped before the end: the node keeps what it has and is interrupted (stream it to retry)."""
    node.status = NodeStatus.INTERRUPTED
    try:
        _save(node, final=True)
    except StreamTakenOver:
        pass  # cancelled or taken over: the other side says what the node is
    except Exception:  # the database went too: the lease runs out, and a later stream takes the node over
        logger.warning("Node %s: could not record that its stream stopped.", node.pk, exc_info=True)


def _close_reasoning(node: Node, reader: _Reader, template, backend) -> Iterator[Streamed]:
    """The reasoning ran past the project's budget: the template's closing marker, as its own tokens."""
    closing = "\n" + template.markers.reasoning[1] + "\n\n"
    for token_id in backend.tokenize(closing):
        text, settled = reader.add(token_id, origin=Origin.TEMPLATE)
        yield Streamed(node.pk, len(node.token_ids) - 1, token_id, text, None, Origin.TEMPLATE,
                       reader.tokens[-1].channel, settled)
    _save(node)


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
