"""onPanda over the API, per project: configure, import, roll out, claim, queue, review, metrics.

A session's own operations (read, correct, stream, tool calls, rounds, trees, accept) are in session_api.py."""

from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from dataplatform.accounts.permissions import (
    CAN_ANNOTATE,
    CAN_CURATE,
    project_for,
    request_token,
)
from dataplatform.apiutils import UPLOAD_PARSERS, import_upload, uploaded_file
from dataplatform.inputs import validated
from dataplatform.jobs import services as job_services
from dataplatform.jobs.api import JobSerializer

from . import importers, selectors, services
from .job_kinds import RolloutParams
from .metrics import project_metrics
from .models import Claim, ClaimState
from .panda_json import import_panda_json, read_panda_upload
from .reviews import review_session
from .serializers import (
    ClaimSerializer,
    ConfigSerializer,
    PandaImportOptions,
    ReassignSerializer,
    ReviewSerializer,
)

# --- project-level ---------------------------------------------------------------------------------

class ConfigApi(APIView):
    @extend_schema(responses=ConfigSerializer)
    def get(self, request, slug: str):
        project, _role = project_for(request.user, slug, CAN_ANNOTATE, token=request_token(request))
        return Response(ConfigSerializer(services.config_for(project)).data)

    @extend_schema(request=ConfigSerializer, responses=ConfigSerializer)
    def put(self, request, slug: str):
        project, role = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
        changes = ConfigSerializer(data=request.data, partial=True)
        changes.is_valid(raise_exception=True)
        config = services.update_config(project=project, changes=changes.validated_data, role=role)
        return Response(ConfigSerializer(config).data)


class ImportApi(APIView):
    """Upload prompts as JSONL (multipart field `file`). `dry_run` and `skip_bad_lines` are form fields."""

    parser_classes = UPLOAD_PARSERS

    @extend_schema(request={"multipart/form-data": OpenApiTypes.OBJECT}, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, slug: str):
        project, _role = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
        return import_upload(request, importers.import_prompts, project=project)


class ImportPandaApi(APIView):
    """Upload one `.panda.json` file (multipart field `file`): it becomes an item with a finished
    session of the uploading curator (or of `annotator`, a username) holding all its trees. `dry_run`
    checks only (the report says trees, dialogs and operators found, and what is refused); `live` leaves
    the session open under the annotator's claim, to go on correcting it."""

    parser_classes = UPLOAD_PARSERS

    @extend_schema(request={"multipart/form-data": OpenApiTypes.OBJECT}, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, slug: str):
        project, _role = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
        upload = uploaded_file(request, expected=_("a .panda.json file"))
        options = validated(PandaImportOptions(data=request.data, context={"project": project}))
        annotator = options["annotator"] or request.user
        data = read_panda_upload(upload)
        report = import_panda_json(project=project, data=data, annotator=annotator, file=upload.name,
                                   dry_run=options["dry_run"], live=options["live"])
        return Response(report.as_dict(), status=status.HTTP_400_BAD_REQUEST if report.errors else status.HTTP_200_OK)


class RolloutApi(APIView):
    @extend_schema(request=RolloutParams, responses={202: JobSerializer})
    def post(self, request, slug: str):
        project, _role = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
        job = job_services.enqueue_job(project=project, kind="annotate.rollouts", params=request.data,
                                       user=request.user)
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class ClaimApi(APIView):
    """Claim the next item (or get back your current one). 204 when the queue is empty for you."""

    @extend_schema(request=None, responses={200: ClaimSerializer, 204: None})
    def post(self, request, slug: str):
        project, _role = project_for(request.user, slug, CAN_ANNOTATE, token=request_token(request),
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
        project, _role = project_for(request.user, slug, CAN_ANNOTATE, token=request_token(request))
        claims = list(selectors.my_claims(request.user, project)[:200])
        for claim in claims:  # all the requester's own: no query per row for the annotator's name
            claim.annotator = request.user
        return Response(ClaimSerializer(claims, many=True).data)


class QueueApi(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, slug: str):
        project, _role = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
        return Response(selectors.queue_state(project))


class ClaimActionApi(APIView):
    """skip / release (the claim's annotator) or reassign (a curator, body {"username": ...})."""

    @extend_schema(request=OpenApiTypes.OBJECT, responses=ClaimSerializer)
    def post(self, request, slug: str, claim_id: int, action: str):
        token = request_token(request)
        project, _role = project_for(request.user, slug, CAN_ANNOTATE, token=token)
        claim = Claim.objects.filter(item__project=project, pk=claim_id).select_related("item").first()
        if claim is None:
            raise NotFound(_("No such claim."))
        if action in ("skip", "release"):
            if claim.annotator_id != request.user.pk:
                raise NotFound(_("No such claim."))
            state = ClaimState.SKIPPED if action == "skip" else ClaimState.RELEASED
            claim = services.end_claim(claim=claim, state=state)
        elif action == "reassign":
            project_for(request.user, slug, CAN_CURATE, token=token)
            to_user = validated(ReassignSerializer(data=request.data, context={"project": project}))["username"]
            claim = services.reassign(claim=claim, to_user=to_user)
        else:
            raise NotFound(_("Unknown action."))
        return Response(ClaimSerializer(claim).data)


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
        project, _role = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
        return Response(project_metrics(project))
