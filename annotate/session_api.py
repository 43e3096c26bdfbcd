"""onPanda over the API, per session: read it, correct any channel, stream, run tool calls, start rounds and
trees, move around the tree, undo, accept or reject.

Every write names the session `version` the client read (a stale one is a 409) and is for the session's
own annotator alone (anyone else gets a 404). A write that makes a streaming node answers 201 with it;
the client then POSTs the node's stream URL, which sends each token as a server-sent event. A prompt over the
token budget is a 400 at the write, naming what made it long; a node being streamed by another request is a
409 at the stream URL; its annotator may cancel a stream (cancel/), after which select and undo work.
"""

import json
import logging

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from dataplatform.accounts.permissions import request_token
from dataplatform.errors import PlatformError, Refused, database_unavailable
from dataplatform.openapi import STALE_VERSION, error_response

from . import corrections, selectors, services, streaming, turns
from .models import Node
from .serializers import (
    CandidateSerializer,
    CorrectionSerializer,
    EditPromptSerializer,
    EditSelectionSerializer,
    NewRoundSerializer,
    NodeActionSerializer,
    NodeSerializer,
    SessionSerializer,
    ToolRunSerializer,
    VersionSerializer,
)

logger = logging.getLogger(__name__)

STREAM_BUSY = error_response("Another request is streaming this node; wait for it, or cancel it.")


class SessionApi(APIView):
    @extend_schema(responses=SessionSerializer)
    def get(self, request, session_id: int):
        return Response(SessionSerializer(selectors.session_for(request.user, session_id,
                                                                token=request_token(request))).data)


class CandidatesApi(APIView):
    @extend_schema(responses=CandidateSerializer(many=True))
    def get(self, request, session_id: int, node_id: int, position: int):
        session = selectors.session_for(request.user, session_id, token=request_token(request))
        return Response(selectors.candidates_at(selectors.node_of(session, node_id), position))


def _write(request, session_id: int, serializer_class, operation, *, answer=None):
    """The shared shape of a session write: the annotator's own session, the body checked, the operation
    run; the node it made (201) with the session's new version."""
    session = selectors.session_for_writing(request.user, session_id, token=request_token(request))
    data = serializer_class(data=request.data)
    data.is_valid(raise_exception=True)
    fields = data.validated_data
    made = operation(session, fields)
    node = made.node if isinstance(made, turns.NextTurn) else made
    body = NodeSerializer(node).data | {"session_version": fields["version"] + 1}
    if answer:
        body |= answer(made)
    return Response(body, status=status.HTTP_201_CREATED)


class CorrectApi(APIView):
    """Correct the current node at `position`, in any channel: `token_id` (a top-k candidate), `text` (a
    rewrite; end it with <|stop|> to end the response there), or `stop`."""

    @extend_schema(request=CorrectionSerializer, responses={201: NodeSerializer, 409: STALE_VERSION})
    def post(self, request, session_id: int):
        return _write(request, session_id, CorrectionSerializer, lambda session, fields: corrections.correct(
            session=session, version=fields["version"], node_id=fields["node_id"], position=fields["position"],
            token_id=fields.get("token_id"), text=fields.get("text"), stop=fields["stop"], actor=request.user))


class EditSelectionApi(APIView):
    """Replace tokens [start, end) of the current node with `text`, keeping the tokens after them (re-scored)."""

    @extend_schema(request=EditSelectionSerializer, responses={201: NodeSerializer, 409: STALE_VERSION})
    def post(self, request, session_id: int):
        return _write(request, session_id, EditSelectionSerializer, lambda session, fields: corrections.edit_selection(
            session=session, version=fields["version"], node_id=fields["node_id"], start=fields["start"],
            end=fields["end"], text=fields["text"], actor=request.user))


class ContinueGeneratingApi(APIView):
    """A response that ended at its token budget (`length`) gets another budget; stream the node it makes."""

    @extend_schema(request=NodeActionSerializer, responses={201: NodeSerializer, 409: STALE_VERSION})
    def post(self, request, session_id: int):
        return _write(request, session_id, NodeActionSerializer, lambda session, fields: corrections.continue_generating(
            session=session, version=fields["version"], node_id=fields["node_id"], actor=request.user))


class ToolCallsApi(APIView):
    """Run the current response's tool calls: per call `approve`, `edit` (new `arguments`) or `reject`, with
    an optional `note`. The results become the next turn (stream it). A tool that fails to start, hangs or
    is down answers 503 and nothing is saved; a tool that answers with an error is a result like any other."""

    @extend_schema(request=ToolRunSerializer, responses={201: NodeSerializer, 409: STALE_VERSION})
    def post(self, request, session_id: int):
        return _write(request, session_id, ToolRunSerializer, lambda session, fields: turns.run_tool_calls(
            session=session, version=fields["version"], node_id=fields["node_id"],
            decisions=fields.get("decisions"), actor=request.user), answer=lambda made: {"tool_results": made.results})


class NewRoundApi(APIView):
    """Add a user turn after the current answer (onPanda's start_new_round); stream the node it makes."""

    @extend_schema(request=NewRoundSerializer, responses={201: NodeSerializer, 409: STALE_VERSION})
    def post(self, request, session_id: int):
        return _write(request, session_id, NewRoundSerializer, lambda session, fields: turns.start_new_round(
            session=session, version=fields["version"], node_id=fields["node_id"], text=fields["text"],
            actor=request.user))


class GenerateNewApi(APIView):
    """A new tree: the model answers the current prompt again from scratch; stream the node it makes."""

    @extend_schema(request=VersionSerializer, responses={201: NodeSerializer, 409: STALE_VERSION})
    def post(self, request, session_id: int):
        return _write(request, session_id, VersionSerializer, lambda session, fields: turns.generate_new(
            session=session, version=fields["version"], actor=request.user))


class EditPromptApi(APIView):
    """A new tree for an edited prompt (`messages`, `tools`); stream the node it makes."""

    @extend_schema(request=EditPromptSerializer, responses={201: NodeSerializer, 409: STALE_VERSION})
    def post(self, request, session_id: int):
        return _write(request, session_id, EditPromptSerializer, lambda session, fields: turns.edit_prompt(
            session=session, version=fields["version"], messages=fields["messages"], tools=fields.get("tools"),
            actor=request.user))


class EventStreamRenderer(BaseRenderer):
    media_type = "text/event-stream"
    format = "sse"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return json.dumps(data).encode()


class StreamApi(APIView):
    """Continue a streaming (or interrupted) node, sending each token as a server-sent event.

    Events: `token` {node, index, token_id, text, logprob, origin, channel, settled: [[index, channel]]};
    with auto-approve, `turn` {node, tool_results} when tool calls ran and the next turn begins; then
    `done` {node, finish_reason, tokens} or `error` {message} (what was generated so far is kept; POST
    again to retry).
    """

    # JSON first: a refusal (404, 403, 409) is a JSON error unless the client asked for a stream.
    renderer_classes = [JSONRenderer, EventStreamRenderer]

    @extend_schema(request=None, responses={(200, "text/event-stream"): OpenApiTypes.STR, 409: STREAM_BUSY})
    def post(self, request, session_id: int, node_id: int):
        session = selectors.session_for_writing(request.user, session_id, token=request_token(request))
        node = selectors.node_of(session, node_id)
        # Before the 200, so that a refusal is a status: the session closed (400), a prompt over the token budget
        # (400), another request streaming the node (409). A complete node streams nothing: `done` at once.
        streaming.claim_stream(node)
        events = _token_events(node)
        if isinstance(request._request, ASGIRequest):
            events = _async_events(events)
        response = StreamingHttpResponse(events, content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # let a proxy pass tokens through at once
        return response


def _sse(event: str, data: dict) -> bytes:
    # json.dumps escapes newlines, so one data line per event is always well-formed.
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _token_events(node: Node):
    """The stream's events. It always ends with `done` or `error`: the response has begun (200) by the
    time anything fails, so an error can only be told as an event, never as a status."""
    try:
        for event in streaming.continue_node(node=node):
            if isinstance(event, turns.NextTurn):
                node = event.node
                yield _sse("turn", {"node": node.pk, "tool_results": event.results})
                continue
            yield _sse("token", {"node": event.node_id, "index": event.index, "token_id": event.token_id,
                                 "text": event.text, "logprob": event.logprob, "origin": event.origin,
                                 "channel": event.channel, "settled": event.settled})
        node.refresh_from_db()
        yield _sse("done", {"node": node.pk, "finish_reason": node.finish_reason, "tokens": len(node.token_ids)})
    # Not the shared mapping: the stream's 200 has been sent, so every error becomes its `error` event.
    except Refused as exc:  # sending it again changes nothing (a prompt too long, a cancelled stream...)
        yield _sse("error", {"message": exc.detail})
    except Exception as exc:  # noqa: BLE001 (the client must hear of it; logged when it is a bug)
        if database_unavailable(exc):
            reason = _("The database is unavailable for a moment.")
        elif isinstance(exc, PlatformError):  # the model backend or a tool server, most likely
            reason = exc.detail.rstrip(".") + "."
        else:
            logger.exception("The continuation of node %s failed", node.pk)
            reason = _("The continuation failed on the server.")
        yield _sse("error", {"message": _("%(reason)s What was saved before it is kept; retry to continue.")
                              % {"reason": reason}})


async def _async_events(events):
    """Under ASGI, pull the sync generator in Django's sync thread so tokens go out as they come."""
    sentinel = object()
    step = sync_to_async(lambda: next(events, sentinel), thread_sensitive=True)
    try:
        while (chunk := await step()) is not sentinel:
            yield chunk
    finally:  # the client left: end the stream now, in the thread that ran it (the node is left interrupted)
        await sync_to_async(events.close, thread_sensitive=True)()


def _session_action(request, session_id: int, serializer_class, action):
    token = request_token(request)
    session = selectors.session_for_writing(request.user, session_id, token=token)
    data = serializer_class(data=request.data)
    data.is_valid(raise_exception=True)
    session = action(session, data.validated_data)
    # Read back as a session read does: one query with everything the answer shows, not one per relation.
    return Response(SessionSerializer(selectors.session_for(request.user, session.pk, token=token)).data)


class SelectNodeApi(APIView):
    """Move to another node of the session: a sibling branch, another tree, an earlier turn."""

    @extend_schema(request=NodeActionSerializer, responses={200: SessionSerializer, 409: STALE_VERSION})
    def post(self, request, session_id: int):
        return _session_action(request, session_id, NodeActionSerializer, lambda session, data: services.select_node(
            session=session, version=data["version"], node_id=data["node_id"], actor=request.user))


class CancelStreamApi(APIView):
    """End the stream of a node of the session (`node_id`): it keeps the tokens saved so far and is interrupted;
    stream it again to continue, or select, undo or correct."""

    @extend_schema(request=NodeActionSerializer, responses={200: SessionSerializer, 409: STALE_VERSION})
    def post(self, request, session_id: int):
        return _session_action(request, session_id, NodeActionSerializer, lambda session, data: streaming.cancel_stream(
            session=session, version=data["version"], node_id=data["node_id"], actor=request.user))


class UndoApi(APIView):
    @extend_schema(request=VersionSerializer, responses={200: SessionSerializer, 409: STALE_VERSION})
    def post(self, request, session_id: int):
        return _session_action(request, session_id, VersionSerializer, lambda session, data: services.undo(
            session=session, version=data["version"], actor=request.user))


class AcceptApi(APIView):
    @extend_schema(request=VersionSerializer, responses={200: SessionSerializer, 409: STALE_VERSION})
    def post(self, request, session_id: int):
        return _session_action(request, session_id, VersionSerializer, lambda session, data: services.finish(
            session=session, version=data["version"], actor=request.user, accept=True, comment=data["comment"]))


class RejectApi(APIView):
    @extend_schema(request=VersionSerializer, responses={200: SessionSerializer, 409: STALE_VERSION})
    def post(self, request, session_id: int):
        return _session_action(request, session_id, VersionSerializer, lambda session, data: services.finish(
            session=session, version=data["version"], actor=request.user, accept=False, comment=data["comment"]))
