"""onPanda over the API: configure, import, roll out, claim, correct, stream, undo, accept, review."""

import json
import logging

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.handlers.asgi import ASGIRequest
from django.db import InterfaceError, OperationalError
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from dataplatform.accounts.permissions import CAN_ANNOTATE, CAN_CURATE, project_for, request_token, role_in
from dataplatform.apiutils import import_upload, truthy, uploaded_file
from dataplatform.errors import PlatformError
from dataplatform.jobs import services as job_services
from dataplatform.jobs.api import JobSerializer
from dataplatform.openapi import STALE_VERSION

from . import importers, selectors, services
from .metrics import project_metrics
from .models import Claim, ClaimState, Node
from .panda_json import import_panda_json, read_panda_upload
from .reviews import review_session
from .serializers import (
    CandidateSerializer,
    ClaimSerializer,
    ConfigSerializer,
    CorrectionSerializer,
    NodeSerializer,
    ReviewSerializer,
    SessionSerializer,
    VersionSerializer,
)

logger = logging.getLogger(__name__)


# --- project-level ---------------------------------------------------------------------------------

class ConfigApi(APIView):
    @extend_schema(responses=ConfigSerializer)
    def get(self, request, slug: str):
        project, _ = project_for(request.user, slug, CAN_ANNOTATE, token=request_token(request))
        return Response(ConfigSerializer(services.config_for(project)).data)

    @extend_schema(request=ConfigSerializer, responses=ConfigSerializer)
    def put(self, request, slug: str):
        project, _ = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
        changes = ConfigSerializer(data=request.data, partial=True)
        changes.is_valid(raise_exception=True)
        config = services.update_config(project=project, changes=changes.validated_data)
        return Response(ConfigSerializer(config).data)


class ImportApi(APIView):
    """Upload prompts as JSONL (multipart field `file`). `dry_run` and `skip_bad_lines` are form fields."""

    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(request={"multipart/form-data": OpenApiTypes.OBJECT}, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, slug: str):
        project, _ = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
        return import_upload(request, importers.import_prompts, project=project)


class ImportPandaApi(APIView):
    """Upload one `.panda.json` v2 file (multipart field `file`): it becomes an item with a finished
    session of the uploading curator (or of `annotator`, a username). `dry_run` checks only."""

    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(request={"multipart/form-data": OpenApiTypes.OBJECT}, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, slug: str):
        project, _ = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
        upload = uploaded_file(request, expected="a .panda.json file")
        annotator = request.user
        if request.data.get("annotator"):
            annotator = get_user_model().objects.filter(username=request.data["annotator"]).first()
            if annotator is None or role_in(annotator, project) not in CAN_ANNOTATE:
                raise ValidationError({"annotator": ["Not an annotator of this project."]})
        data = read_panda_upload(upload)
        report = import_panda_json(project=project, data=data, annotator=annotator, file=upload.name,
                                   dry_run=truthy(request.data.get("dry_run")), backend=services.backend_for(project))
        return Response(report.as_dict(), status=status.HTTP_400_BAD_REQUEST if report.errors else status.HTTP_200_OK)


class RolloutApi(APIView):
    @extend_schema(request=None, responses={202: JobSerializer})
    def post(self, request, slug: str):
        project, _ = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
        job = job_services.enqueue_job(project=project, kind="annotate.rollouts",
                                       params={"regenerate": truthy(request.data.get("regenerate"))},
                                       user=request.user)
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class ClaimApi(APIView):
    """Claim the next item (or get back your current one). 204 when the queue is empty for you."""

    @extend_schema(request=None, responses={200: ClaimSerializer, 204: None})
    def post(self, request, slug: str):
        project, _ = project_for(request.user, slug, CAN_ANNOTATE, token=request_token(request),
                                 related=["annotation_config"])
        claim = services.claim_with_session(project=project, annotator=request.user)
        if claim is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        # The claim is the row as written (INSERT or UPDATE ... RETURNING): nothing to read back.
        claim.annotator = request.user
        return Response(ClaimSerializer(claim).data)


class MyItemsApi(APIView):
    @extend_schema(responses=ClaimSerializer(many=True))
    def get(self, request, slug: str):
        project, _ = project_for(request.user, slug, CAN_ANNOTATE, token=request_token(request))
        return Response(ClaimSerializer(selectors.my_claims(request.user, project)[:200], many=True).data)


class QueueApi(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, slug: str):
        project, _ = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
        return Response(selectors.queue_state(project))


class ClaimActionApi(APIView):
    """skip / release (the claim's annotator) or reassign (a curator, body {"username": ...})."""

    @extend_schema(request=OpenApiTypes.OBJECT, responses=ClaimSerializer)
    def post(self, request, slug: str, claim_id: int, action: str):
        token = request_token(request)
        project, _ = project_for(request.user, slug, CAN_ANNOTATE, token=token)
        claim = Claim.objects.filter(item__project=project, pk=claim_id).select_related("item").first()
        if claim is None:
            raise NotFound("No such claim.")
        if action in ("skip", "release"):
            if claim.annotator_id != request.user.pk:
                raise NotFound("No such claim.")
            state = ClaimState.SKIPPED if action == "skip" else ClaimState.RELEASED
            claim = services.end_claim(claim=claim, state=state)
        elif action == "reassign":
            project_for(request.user, slug, CAN_CURATE, token=token)
            to_user = get_user_model().objects.filter(username=request.data.get("username", "")).first()
            if to_user is None or role_in(to_user, project) not in CAN_ANNOTATE:
                raise ValidationError({"username": ["Not an annotator of this project."]})
            claim = services.reassign(claim=claim, to_user=to_user)
        else:
            raise NotFound("Unknown action.")
        return Response(ClaimSerializer(claim).data)


# --- sessions -----------------------------------------------------------------------------------

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


class CorrectApi(APIView):
    """Correct the current node at `position`: `token_id` (a top-k candidate), `text` (a rewrite), or `stop`."""

    @extend_schema(request=CorrectionSerializer, responses={201: NodeSerializer, 409: STALE_VERSION})
    def post(self, request, session_id: int):
        session = selectors.session_for_writing(request.user, session_id, token=request_token(request))
        data = CorrectionSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        node = services.correct(
            session=session, version=fields["version"], node_id=fields["node_id"], position=fields["position"],
            token_id=fields.get("token_id"), text=fields.get("text"), stop=fields["stop"], actor=request.user,
        )
        return Response(NodeSerializer(node).data | {"session_version": fields["version"] + 1},
                        status=status.HTTP_201_CREATED)


class EventStreamRenderer(BaseRenderer):
    media_type = "text/event-stream"
    format = "sse"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return json.dumps(data).encode()


class StreamApi(APIView):
    """Continue a streaming (or interrupted) node, sending each token as a server-sent event.

    Events: `token` {index, token_id, text, logprob, origin}, then `done` {finish_reason}
    or `error` {message} (what was generated so far is kept; POST again to retry).
    """

    # JSON first: a refusal (404, 403, 409) is a JSON error unless the client asked for a stream.
    renderer_classes = [JSONRenderer, EventStreamRenderer]

    @extend_schema(request=None, responses={(200, "text/event-stream"): OpenApiTypes.STR})
    def post(self, request, session_id: int, node_id: int):
        session = selectors.session_for_writing(request.user, session_id, token=request_token(request))
        node = selectors.node_of(session, node_id)
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
    index = len(node.token_ids)
    pending = b""
    try:
        backend = services.backend_for(node.session.item.project)
        for step in services.continue_node(node=node):
            # Byte-level BPE: send text only once a whole character is complete.
            pending += backend.token_pieces([step.token_id])[0]
            try:
                text, pending = pending.decode("utf-8"), b""
            except UnicodeDecodeError:  # not an error: the character's next bytes come with the next tokens
                text = ""
            yield _sse("token", {"index": index, "token_id": step.token_id, "text": text, "logprob": step.logprob,
                                 "origin": "model"})
            index += 1
        node.refresh_from_db()
        yield _sse("done", {"finish_reason": node.finish_reason, "tokens": len(node.token_ids)})
    # Not the shared mapping: the stream's 200 has been sent, so every error becomes its `error` event.
    except services.AnnotationError as exc:
        yield _sse("error", {"message": str(exc)})
    except Exception as exc:  # noqa: BLE001 (the client must hear of it; logged when it is a bug)
        if isinstance(exc, (OperationalError, InterfaceError)):
            reason = "The database is unavailable for a moment."
        elif isinstance(exc, PlatformError):  # the model backend, most likely
            reason = exc.detail.rstrip(".") + "."
        else:
            logger.exception("The continuation of node %s failed", node.pk)
            reason = "The continuation failed on the server."
        yield _sse("error", {"message": f"{reason} What was saved before it is kept; retry to continue."})


async def _async_events(events):
    """Under ASGI, pull the sync generator in Django's sync thread so tokens go out as they come."""
    sentinel = object()
    step = sync_to_async(lambda: next(events, sentinel), thread_sensitive=True)
    while (chunk := await step()) is not sentinel:
        yield chunk


class UndoApi(APIView):
    @extend_schema(request=VersionSerializer, responses={200: SessionSerializer, 409: STALE_VERSION})
    def post(self, request, session_id: int):
        return _session_action(request, session_id, lambda session, data: services.undo(
            session=session, version=data["version"], actor=request.user))


class AcceptApi(APIView):
    @extend_schema(request=VersionSerializer, responses={200: SessionSerializer, 409: STALE_VERSION})
    def post(self, request, session_id: int):
        return _session_action(request, session_id, lambda session, data: services.finish(
            session=session, version=data["version"], actor=request.user, accept=True, comment=data["comment"]))


class RejectApi(APIView):
    @extend_schema(request=VersionSerializer, responses={200: SessionSerializer, 409: STALE_VERSION})
    def post(self, request, session_id: int):
        return _session_action(request, session_id, lambda session, data: services.finish(
            session=session, version=data["version"], actor=request.user, accept=False, comment=data["comment"]))


def _session_action(request, session_id: int, action):
    token = request_token(request)
    session = selectors.session_for_writing(request.user, session_id, token=token)
    data = VersionSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    session = action(session, data.validated_data)
    # Read back as a session read does: one query with everything the answer shows, not one per relation.
    return Response(SessionSerializer(selectors.session_for(request.user, session.pk, token=token)).data)


class ReviewApi(APIView):
    """A curator approves or rejects an accepted session (a rejection needs a comment)."""

    @extend_schema(request=ReviewSerializer, responses={201: OpenApiTypes.OBJECT})
    def post(self, request, session_id: int):
        token = request_token(request)
        session = selectors.session_for(request.user, session_id, token=token)
        project_for(request.user, session.item.project.slug, CAN_CURATE, token=token)
        data = ReviewSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        review = review_session(session=session, reviewer=request.user, **data.validated_data)
        return Response({"id": review.pk, "session": session.pk, "decision": review.decision,
                         "comment": review.comment, "created_at": review.created_at},
                        status=status.HTTP_201_CREATED)


class MetricsApi(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, slug: str):
        project, _ = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
        return Response(project_metrics(project))
