"""The SWE Labeler over the API: taxonomies, settings, import, auto-labeling, tasks and trajectories, review,
metrics."""

from django.db.models import Q
from django.utils.translation import gettext
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from dataplatform.accounts.permissions import CAN_ANNOTATE, CAN_CURATE, project_for, request_token
from dataplatform.apiutils import import_upload
from dataplatform.inputs import validated
from dataplatform.jobs import services as job_services
from dataplatform.jobs.api import JobSerializer
from dataplatform.openapi import STALE_VERSION
from dataplatform.pagination import CreatedCursorPagination, paginated

from . import agreement, importers, selectors, services
from .job_kinds import AutolabelParams
from .models import ReviewClaim, ReviewClaimState, SourceKind, Taxonomy, TrajectoryReviewClaim
from .serializers import (
    EditSerializer,
    ImportKindSerializer,
    LabelSerializer,
    LabelVersionSerializer,
    MetricsQuerySerializer,
    ReviewClaimSerializer,
    SettingsSerializer,
    TaskDetailSerializer,
    TaskSerializer,
    TaxonomyDetailSerializer,
    TaxonomySerializer,
    TaxonomyUploadSerializer,
    TrajectoryClaimSerializer,
    TrajectoryDetailSerializer,
    TrajectorySerializer,
)

IMPORTERS = {SourceKind.TASKS: importers.import_tasks, SourceKind.TRAJECTORIES: importers.import_trajectories}

# --- taxonomies -----------------------------------------------------------------------------------

class TaxonomyListApi(APIView):
    @extend_schema(responses=TaxonomySerializer(many=True))
    def get(self, request):
        taxonomies = selectors.taxonomies_visible_to(request.user, token=request_token(request))
        return Response(TaxonomySerializer(taxonomies, many=True).data)


class TaxonomyDetailApi(APIView):
    @extend_schema(responses=TaxonomyDetailSerializer)
    def get(self, request, taxonomy_id: int):
        taxonomy = selectors.taxonomies_visible_to(request.user, token=request_token(request)).filter(
            pk=taxonomy_id).first()
        if taxonomy is None:
            raise NotFound(gettext("No such taxonomy."))
        return Response(TaxonomyDetailSerializer(taxonomy).data)


# --- project-level --------------------------------------------------------------------------------

class SettingsApi(APIView):
    @extend_schema(responses=SettingsSerializer)
    def get(self, request, slug: str):
        project, _ = project_for(request.user, slug, CAN_ANNOTATE, token=request_token(request))
        return Response(_settings_data(services.settings_for(project)))

    @extend_schema(request=SettingsSerializer, responses=SettingsSerializer)
    def put(self, request, slug: str):
        token = request_token(request)
        project, _ = project_for(request.user, slug, CAN_CURATE, token=token)
        changes = validated(SettingsSerializer(data=request.data, partial=True,
                                               context={"user": request.user, "token": token}))
        return Response(_settings_data(services.update_settings(project=project, **changes)))


def _settings_data(settings) -> dict:
    return {"taxonomy": settings.taxonomy_id, "taxonomy_version": str(settings.taxonomy),
            **{name: getattr(settings, name) for name in ("model_name", "overlap", "lease_minutes", "max_tokens",
                                                          "temperature", "batch_size", "max_problem_chars",
                                                          "max_patch_chars", "max_test_patch_chars",
                                                          "max_trajectory_chars", "trajectory_l1_mode")},
            # Where the project's protocol differs from the published labeler's: field -> [ours, the paper's].
            "differs_from_paper": {name: list(pair) for name, pair in settings.differences_from_paper().items()}}


class TaxonomyUploadApi(APIView):
    """Upload a taxonomy (multipart `file`): one YAML file of this platform's format, or the published SWE
    Labeler's definition files (`file` given once per file: task_type_l2.yaml, domain_l2.yaml,
    orthogonal.yaml, routing.json; or a zip of the folder), named by `name` and `version` (default
    swe-upstream, upstream-<hash>). Validated, stored as an immutable version, and pinned to the project
    unless `pin` is false. Errors name the file, line and field."""

    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(request={"multipart/form-data": TaxonomyUploadSerializer}, responses={201: TaxonomySerializer})
    def post(self, request, slug: str):
        project, _ = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
        upload = validated(TaxonomyUploadSerializer(data=request.data))
        if "files" in upload:
            taxonomy = services.load_upstream_taxonomy(files=upload["files"], name=upload["name"],
                                                       version=upload["version"], user=request.user)
        else:
            taxonomy = services.load_taxonomy(text=upload["text"], filename=upload["filename"], user=request.user)
        if upload["pin"]:
            services.update_settings(project=project, taxonomy=taxonomy)
        return Response(TaxonomySerializer(taxonomy).data, status=status.HTTP_201_CREATED)


class ImportApi(APIView):
    """Upload SWE tasks (`kind=tasks`) or trajectories (`kind=trajectories`: any trace format the platform reads,
    or a SWE-agent `.traj` file) as JSONL in the field `file`. `dry_run` and `skip_bad_lines` are form fields."""

    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(request={"multipart/form-data": OpenApiTypes.OBJECT}, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, slug: str):
        project, _ = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
        kind = validated(ImportKindSerializer(data=request.data))["kind"]
        return import_upload(request, IMPORTERS[kind], project=project, user=request.user)


class AutolabelApi(APIView):
    """Start the auto-labeling job (body: `retry_errors`, `limit`). Progress: GET /api/v1/jobs/{id}/."""

    @extend_schema(request=AutolabelParams, responses={202: JobSerializer})
    def post(self, request, slug: str):
        project, _ = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
        job = job_services.enqueue_job(project=project, kind="labeler.autolabel", params=request.data,
                                       user=request.user)
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


def _review_state(params) -> str:
    """The `state` filter of the task and trajectory lists ("" for any), or a 400 naming the valid ones."""
    state = params.get("state", "")
    if state and state not in selectors.REVIEW_STATES:
        raise ValidationError({"state": [gettext("Must be one of %(states)s.") % {"states": ", ".join(selectors.REVIEW_STATES)}]})
    return state


class TaskListApi(APIView):
    """Tasks you may see, newest first, cursor-paginated. Filters: `state` (unlabeled, auto, error,
    reviewed), `field` + `value` (a label field and a slug or tag), `search` (instance id or repo)."""

    @extend_schema(parameters=[OpenApiParameter("state", str, enum=list(selectors.REVIEW_STATES)),
                               OpenApiParameter("field", str), OpenApiParameter("value", str),
                               OpenApiParameter("search", str), OpenApiParameter("cursor", str)],
                   responses=paginated(TaskSerializer), operation_id="v1_projects_labeler_tasks_list")
    def get(self, request, slug: str):
        token = request_token(request)
        project, _ = project_for(request.user, slug, CAN_ANNOTATE, token=token)
        params = request.query_params
        taxonomy = services.settings_for(project).taxonomy
        # No review-state columns (the rows do not show them): the planner may hash every label of the project to
        # answer them, for a page of 25 (12 ms at 10k tasks, 53 ms at 100k).
        tasks = selectors.filter_tasks(selectors.tasks_visible_to(request.user, project, token=token), taxonomy,
                                       state=_review_state(params), field=params.get("field", ""),
                                       value=params.get("value", ""), search=params.get("search", ""), annotate=False)
        paginator = CreatedCursorPagination()
        page = paginator.paginate_queryset(tasks, request, view=self)
        return paginator.get_paginated_response(TaskSerializer(page, many=True).data)


class TaskDetailApi(APIView):
    @extend_schema(responses=TaskDetailSerializer)
    def get(self, request, slug: str, task_id: int):
        token = request_token(request)
        project, _ = project_for(request.user, slug, CAN_ANNOTATE, token=token)
        task = selectors.task_for(request.user, project, task_id, token=token)
        return Response(TaskDetailSerializer(task, context={"request": request}).data)


class TrajectoryListApi(APIView):
    """Trajectories you may see (curators: all; reviewers: the ones they claimed), newest first, cursor-paginated.
    Filters: `state` (unlabeled, auto, error, reviewed, by the trajectory's own labels), `search` (trajectory or
    instance id)."""

    @extend_schema(parameters=[OpenApiParameter("state", str, enum=list(selectors.REVIEW_STATES)),
                               OpenApiParameter("search", str), OpenApiParameter("cursor", str)],
                   responses=paginated(TrajectorySerializer), operation_id="v1_projects_labeler_trajectories_list")
    def get(self, request, slug: str):
        token = request_token(request)
        project, _ = project_for(request.user, slug, CAN_ANNOTATE, token=token)
        params = request.query_params
        taxonomy = services.settings_for(project).taxonomy
        trajectories = selectors.filter_by_state(selectors.trajectories_visible_to(request.user, project, token=token),
                                                 taxonomy, _review_state(params), annotate=False)
        if params.get("search"):
            trajectories = trajectories.filter(Q(trajectory_id__icontains=params["search"])
                                               | Q(instance_id__icontains=params["search"]))
        paginator = CreatedCursorPagination()
        page = paginator.paginate_queryset(trajectories, request, view=self)
        return paginator.get_paginated_response(TrajectorySerializer(page, many=True).data)


class TrajectoryDetailApi(APIView):
    @extend_schema(responses=TrajectoryDetailSerializer)
    def get(self, request, slug: str, trajectory_id: int):
        token = request_token(request)
        project, _ = project_for(request.user, slug, CAN_ANNOTATE, token=token)
        trajectory = selectors.trajectory_for(request.user, project, trajectory_id, token=token)
        return Response(TrajectoryDetailSerializer(trajectory, context={"request": request}).data)


class ClaimApi(APIView):
    """Claim the next task to review (or get back your current one), with your label pre-filled from
    the model's. 204 when nothing is left for you."""

    queue = services.TASKS
    serializer = ReviewClaimSerializer

    @extend_schema(request=None, responses={200: ReviewClaimSerializer, 204: None})
    def post(self, request, slug: str):
        project, _ = project_for(request.user, slug, CAN_ANNOTATE, token=request_token(request))
        claim = services.claim_next(project=project, reviewer=request.user, queue=self.queue)
        if claim is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        item = claim.task if self.queue == services.TASKS else claim.trajectory
        label = services.start_review(item=item, reviewer=request.user)
        return Response(self.serializer(claim, context={"label": label}).data)


class TrajectoryClaimApi(ClaimApi):
    """Claim the next trajectory to review (or get back your current one), with your label pre-filled from the
    model's. 204 when nothing is left for you."""

    queue = services.TRAJECTORIES
    serializer = TrajectoryClaimSerializer

    @extend_schema(request=None, responses={200: TrajectoryClaimSerializer, 204: None})
    def post(self, request, slug: str):
        return super().post(request, slug)


STATES = {"skip": ReviewClaimState.SKIPPED, "release": ReviewClaimState.RELEASED}


class ClaimActionApi(APIView):
    """`skip` or `release` your review claim."""

    @extend_schema(request=None, responses=ReviewClaimSerializer)
    def post(self, request, slug: str, claim_id: int, action: str):
        project, _ = project_for(request.user, slug, CAN_ANNOTATE, token=request_token(request))
        claim = ReviewClaim.objects.filter(task__project=project, pk=claim_id, reviewer=request.user).first()
        if claim is None or action not in STATES:
            raise NotFound(gettext("No such claim or action."))
        return Response(ReviewClaimSerializer(services.end_review_claim(claim=claim, state=STATES[action])).data)


class TrajectoryClaimActionApi(APIView):
    """`skip` or `release` your trajectory review claim."""

    @extend_schema(request=None, responses=TrajectoryClaimSerializer)
    def post(self, request, slug: str, trajectory_claim_id: int, action: str):
        project, _ = project_for(request.user, slug, CAN_ANNOTATE, token=request_token(request))
        claim = TrajectoryReviewClaim.objects.filter(project=project, pk=trajectory_claim_id,
                                                     reviewer=request.user).first()
        if claim is None or action not in STATES:
            raise NotFound(gettext("No such claim or action."))
        return Response(TrajectoryClaimSerializer(services.end_review_claim(claim=claim, state=STATES[action])).data)


class QueueApi(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, slug: str):
        project, _ = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
        return Response(selectors.queue_state(project))


class MetricsApi(APIView):
    """Agreement (model vs reviewers, reviewer vs reviewer) and label distributions, per taxonomy version
    (`taxonomy`, default: the pinned one)."""

    @extend_schema(parameters=[MetricsQuerySerializer], responses={200: OpenApiTypes.OBJECT})
    def get(self, request, slug: str):
        project, _ = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
        query = MetricsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        taxonomy = services.settings_for(project).taxonomy
        if "taxonomy" in query.validated_data:
            taxonomy = Taxonomy.objects.filter(pk=query.validated_data["taxonomy"]).first()
            if taxonomy is None:
                raise NotFound(gettext("No such taxonomy."))
        body = {"taxonomy": str(taxonomy), **agreement.reports(project.pk, taxonomy)}  # kept counts (agreement.py)
        if "compare" in query.validated_data:
            other = selectors.taxonomies_visible_to(request.user, token=request_token(request)).filter(
                pk=query.validated_data["compare"]).first()
            if other is None:
                raise NotFound(gettext("No such taxonomy to compare with."))
            # The latest comparison job's result (a job of kind labeler.compare_versions runs it: it reads every
            # final label of both versions), as of when it finished; null until one has run.
            comparison = selectors.version_comparison(project, taxonomy, other)
            kept = comparison.kept
            body["version_changes"] = kept and {**kept.result, "as_of": kept.finished_at, "job": kept.pk}
            body["version_changes_pending"] = comparison.pending and comparison.pending.pk
        return Response(body)


# --- labels ---------------------------------------------------------------------------------------

class LabelApi(APIView):
    """Read a label; PATCH your own with {version, values} (a stale version is 409)."""

    @extend_schema(responses=LabelSerializer)
    def get(self, request, label_id: int):
        return Response(LabelSerializer(selectors.label_for(request.user, label_id, token=request_token(request))).data)

    @extend_schema(request=EditSerializer, responses={200: LabelSerializer, 409: STALE_VERSION})
    def patch(self, request, label_id: int):
        label = selectors.label_for_writing(request.user, label_id, token=request_token(request))
        edit = validated(EditSerializer(data=request.data, context={"spec": label.taxonomy.definition}))
        label = services.edit_label(label=label, version=edit["version"], changes=edit["values"], actor=request.user)
        return Response(LabelSerializer(label).data)


class LabelSubmitApi(APIView):
    """Accept your label as it stands (every field set and valid); ends your claim on the task."""

    @extend_schema(request=LabelVersionSerializer, responses={200: LabelSerializer, 409: STALE_VERSION})
    def post(self, request, label_id: int):
        label = selectors.label_for_writing(request.user, label_id, token=request_token(request))
        version = validated(LabelVersionSerializer(data=request.data))["version"]
        label = services.submit_label(label=label, version=version, actor=request.user)
        return Response(LabelSerializer(label).data)
