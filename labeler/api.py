"""The SWE Labeler over the API: taxonomies, settings, import, auto-labeling, tasks and trajectories, review,
metrics."""

from django.db.models import Q
from django.utils.translation import gettext
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from dataplatform.accounts.permissions import CAN_ANNOTATE, CAN_CURATE, project_for, request_token
from dataplatform.apiutils import MAX_ID, MAX_INT, import_upload, uploaded_file, uploaded_files
from dataplatform.imports import decode_whole_file
from dataplatform.inference import validate_served_model_name
from dataplatform.jobs import services as job_services
from dataplatform.jobs.api import JobSerializer
from dataplatform.openapi import STALE_VERSION
from dataplatform.pagination import CreatedCursorPagination, paginated

from . import importers, metrics, selectors, services, trajectory_mode, upstream
from .models import Label, ReviewClaim, ReviewClaimState, SweTask, Taxonomy, Trajectory, TrajectoryReviewClaim

# --- serializers --------------------------------------------------------------------------------

class TaxonomySerializer(serializers.ModelSerializer):
    counts = serializers.SerializerMethodField()

    class Meta:
        model = Taxonomy
        fields = ["id", "name", "version", "title", "sha256", "source_filename", "created_at", "counts"]

    def get_counts(self, taxonomy: Taxonomy) -> dict:
        return taxonomy.definition.counts()


class TaxonomyDetailSerializer(TaxonomySerializer):
    class Meta(TaxonomySerializer.Meta):
        fields = [*TaxonomySerializer.Meta.fields, "spec"]


class SettingsSerializer(serializers.Serializer):
    taxonomy = serializers.PrimaryKeyRelatedField(queryset=Taxonomy.objects.all())
    model_name = serializers.CharField(max_length=200, allow_blank=True, required=False,
                                       validators=[validate_served_model_name])
    overlap = serializers.IntegerField(min_value=1, max_value=20, required=False)
    lease_minutes = serializers.IntegerField(min_value=1, max_value=24 * 60, required=False)
    max_tokens = serializers.IntegerField(min_value=16, max_value=8192, required=False)
    temperature = serializers.FloatField(min_value=0.0, max_value=2.0, required=False)
    batch_size = serializers.IntegerField(min_value=1, max_value=256, required=False)
    max_problem_chars = serializers.IntegerField(min_value=100, max_value=100_000, required=False)
    max_patch_chars = serializers.IntegerField(min_value=100, max_value=100_000, required=False)
    max_test_patch_chars = serializers.IntegerField(min_value=0, max_value=100_000, required=False)
    max_trajectory_chars = serializers.IntegerField(min_value=1000, max_value=1_000_000, required=False)
    trajectory_l1_mode = serializers.ChoiceField(choices=["preserve", "relabel"], required=False)


class LabelSerializer(serializers.ModelSerializer):
    author = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True,
                                          help_text="null on the model's label")
    taxonomy = serializers.StringRelatedField()
    category = serializers.SerializerMethodField()

    class Meta:
        model = Label
        fields = ["id", "task", "trajectory", "taxonomy", "origin", "author", "status", "values", "rationales",
                  "provenance", "version", "model_id", "task_sha256", "l1_source", "error", "category", "created_at",
                  "updated_at"]

    def get_category(self, label: Label) -> str:
        return label.taxonomy.definition.category_for(label.values)


class TaskSerializer(serializers.ModelSerializer):
    class Meta:
        model = SweTask
        fields = ["id", "instance_id", "repo", "base_commit", "created_at"]


class TaskDetailSerializer(serializers.ModelSerializer):
    labels = serializers.SerializerMethodField()

    class Meta:
        model = SweTask
        fields = ["id", "instance_id", "repo", "base_commit", "problem_statement", "patch", "test_patch",
                  "fail_to_pass", "pass_to_pass", "extra", "source_sha256", "created_at", "labels"]

    def get_labels(self, task: SweTask) -> list[dict]:
        return LabelSerializer(selectors.labels_of(self.context["request"].user, task), many=True).data


class TrajectorySerializer(serializers.ModelSerializer):
    class Meta:
        model = Trajectory
        fields = ["id", "trajectory_id", "instance_id", "task", "model", "scaffold", "source_format", "created_at"]


class TrajectoryDetailSerializer(serializers.ModelSerializer):
    labels = serializers.SerializerMethodField()
    summary = serializers.SerializerMethodField(help_text="what the model is shown in the trajectory mode")

    class Meta:
        model = Trajectory
        fields = ["id", "trajectory_id", "instance_id", "task", "model", "scaffold", "source_format", "messages",
                  "tools", "extra", "source_sha256", "created_at", "summary", "labels"]

    def get_labels(self, trajectory: Trajectory) -> list[dict]:
        return LabelSerializer(selectors.labels_of(self.context["request"].user, trajectory), many=True).data

    def get_summary(self, trajectory: Trajectory) -> str | None:
        try:
            return trajectory_mode.describe(trajectory, services.settings_for(trajectory.project))
        except trajectory_mode.Unreadable:
            return None


class ReviewClaimSerializer(serializers.ModelSerializer):
    reviewer = serializers.SlugRelatedField(slug_field="username", read_only=True)
    label = serializers.SerializerMethodField()

    class Meta:
        model = ReviewClaim
        fields = ["id", "task", "reviewer", "state", "lease_expires_at", "label"]

    def get_label(self, claim: ReviewClaim) -> dict | None:
        label = self.context.get("label")
        return LabelSerializer(label).data if label else None


class TrajectoryClaimSerializer(ReviewClaimSerializer):
    class Meta:
        model = TrajectoryReviewClaim
        fields = ["id", "trajectory", "reviewer", "state", "lease_expires_at", "label"]


class EditSerializer(serializers.Serializer):
    version = serializers.IntegerField(min_value=0, max_value=MAX_INT)
    values = serializers.DictField(help_text="field → slug, or [slugs] for an L2 field")


class LabelVersionSerializer(serializers.Serializer):
    version = serializers.IntegerField(min_value=0, max_value=MAX_INT)


class MetricsQuerySerializer(serializers.Serializer):
    taxonomy = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                        help_text="taxonomy version id (default: the pinned one)")
    compare = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                       help_text="another version: which final labels differ under it, per field")


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
        project, _ = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
        data = SettingsSerializer(data={"taxonomy": services.settings_for(project).taxonomy_id, **request.data})
        data.is_valid(raise_exception=True)
        return Response(_settings_data(services.update_settings(project=project, **data.validated_data)))


def _settings_data(settings) -> dict:
    return {"taxonomy": settings.taxonomy_id, "taxonomy_version": str(settings.taxonomy),
            **{name: getattr(settings, name) for name in ("model_name", "overlap", "lease_minutes", "max_tokens",
                                                          "temperature", "batch_size", "max_problem_chars",
                                                          "max_patch_chars", "max_test_patch_chars")},
            # Where the project's protocol differs from the published labeler's: field -> [ours, the paper's].
            "differs_from_paper": {name: list(pair) for name, pair in settings.differences_from_paper().items()}}


class TaxonomyUploadApi(APIView):
    """Upload a taxonomy (multipart `file`): one YAML file of this platform's format, or the published SWE
    Labeler's definition files (`file` given once per file: task_type_l2.yaml, domain_l2.yaml,
    orthogonal.yaml, routing.json; or a zip of the folder), named by `name` and `version` (default
    swe-upstream, upstream-<hash>). Validated, stored as an immutable version, and pinned to the project
    unless `pin` is false. Errors name the file, line and field."""

    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(request={"multipart/form-data": OpenApiTypes.OBJECT}, responses={201: TaxonomySerializer})
    def post(self, request, slug: str):
        project, _ = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
        uploads = uploaded_files(request, expected=gettext("a taxonomy file, or the published definition files"))
        for upload in uploads:
            if upload.size > services.MAX_TAXONOMY_BYTES:
                raise ValidationError({"file": [gettext("%(file)s is larger than %(limit)s bytes.") % {
                    "file": upload.name, "limit": f"{services.MAX_TAXONOMY_BYTES:,}"}]})
        if upstream.is_upstream_upload([upload.name for upload in uploads]):
            taxonomy = services.load_upstream_taxonomy(
                files={upload.name: upload.read() for upload in uploads},
                name=str(request.data.get("name", "")).strip() or "swe-upstream",
                version=str(request.data.get("version", "")).strip(), user=request.user)
        else:
            upload = uploaded_file(request, expected=gettext("a taxonomy YAML file"))  # one file: two are a 400
            try:
                text = decode_whole_file(upload.read())
            except ValueError as exc:  # a 400 on `file` as the shared mapping gives, with the file's name in front
                raise ValidationError({"file": [gettext("%(file)s, %(problem)s") % {"file": upload.name, "problem": exc}]}) from None
            taxonomy = services.load_taxonomy(text=text, filename=upload.name, user=request.user)
        if request.data.get("pin", "true") not in ("false", "0", False):
            services.update_settings(project=project, taxonomy=taxonomy)
        return Response(TaxonomySerializer(taxonomy).data, status=status.HTTP_201_CREATED)


class ImportApi(APIView):
    """Upload SWE tasks (`kind=tasks`) or trajectories (`kind=trajectories`: any trace format the platform reads,
    or a SWE-agent `.traj` file) as JSONL in the field `file`. `dry_run` and `skip_bad_lines` are form fields."""

    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(request={"multipart/form-data": OpenApiTypes.OBJECT}, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, slug: str):
        project, _ = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
        kind = request.data.get("kind", "tasks")
        importer = {"tasks": importers.import_tasks, "trajectories": importers.import_trajectories}.get(kind)
        if importer is None:
            raise ValidationError({"kind": [gettext("Must be 'tasks' or 'trajectories'.")]})
        return import_upload(request, importer, project=project, user=request.user)


class AutolabelApi(APIView):
    """Start the auto-labeling job (body: `retry_errors`, `limit`). Progress: GET /api/v1/jobs/{id}/."""

    @extend_schema(request=OpenApiTypes.OBJECT, responses={202: JobSerializer})
    def post(self, request, slug: str):
        project, _ = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
        job = job_services.enqueue_job(project=project, kind="labeler.autolabel", params=dict(request.data),
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
        tasks = selectors.filter_tasks(selectors.tasks_visible_to(request.user, project, token=token),
                                       services.settings_for(project).taxonomy, state=_review_state(params),
                                       field=params.get("field", ""), value=params.get("value", ""),
                                       search=params.get("search", ""))
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
        trajectories = selectors.filter_by_state(
            selectors.trajectories_visible_to(request.user, project, token=token),
            services.settings_for(project).taxonomy, _review_state(params))
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
        labels = selectors.project_labels(project).filter(taxonomy=taxonomy)
        body = {"taxonomy": str(taxonomy), "llm_vs_human": metrics.llm_vs_human(labels, taxonomy),
                "human_vs_human": metrics.human_vs_human(labels, taxonomy),
                "distributions": metrics.label_distributions(labels, taxonomy)}
        if "compare" in query.validated_data:
            other = Taxonomy.objects.filter(pk=query.validated_data["compare"]).first()
            if other is None:
                raise NotFound(gettext("No such taxonomy to compare with."))
            body["version_changes"] = {"from": str(taxonomy), "to": str(other), **metrics.version_changes(
                labels, selectors.project_labels(project).filter(taxonomy=other), taxonomy, other)}
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
        data = EditSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        label = services.edit_label(label=label, version=data.validated_data["version"],
                                    changes=data.validated_data["values"], actor=request.user)
        return Response(LabelSerializer(label).data)


class LabelSubmitApi(APIView):
    """Accept your label as it stands (every field set and valid); ends your claim on the task."""

    @extend_schema(request=LabelVersionSerializer, responses={200: LabelSerializer, 409: STALE_VERSION})
    def post(self, request, label_id: int):
        label = selectors.label_for_writing(request.user, label_id, token=request_token(request))
        data = LabelVersionSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        label = services.submit_label(label=label, version=data.validated_data["version"], actor=request.user)
        return Response(LabelSerializer(label).data)
