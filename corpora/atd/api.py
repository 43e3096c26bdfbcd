"""ATD over the API: import the prompt pool, score it with the ancestor, count near-ties per epsilon,
freeze selections and ask the teacher. Curators and admins only (annotators and trainers 403,
outsiders 404). Runs and teacher runs start a job and answer 202 with it.
"""


from django.utils.translation import gettext
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from dataplatform.accounts.permissions import CAN_CURATE, project_for, request_token
from dataplatform.apiutils import MAX_ID, MAX_INT, UPLOAD_PARSERS, import_upload
from dataplatform.jobs.api import JobSerializer
from dataplatform.pagination import CreatedCursorPagination, paginated

from . import importers, selectors, services
from .inputs import AtdScoringRunCreateSerializer, AtdSelectionCreateSerializer, AtdTeacherCreateSerializer
from .models import AtdPrompt, ScoringRun, Selection, TeacherRun

MAX_EPSILONS = 50


# --- query parameters (the page's live count reads them the same way) ----------------------------------

def parse_epsilon(value) -> float:
    try:
        epsilon = float(value)
    except (TypeError, ValueError):  # one message for anything that is not a number
        raise ValueError(gettext("epsilon must be a number, got %(value)r") % {"value": value}) from None
    if not 0 <= epsilon <= 0.5:  # also false for NaN
        raise ValueError(gettext("epsilon must be between 0 and 0.5."))
    return epsilon


def parse_bias_threshold(value) -> float:
    try:
        threshold = float(value)
    except (TypeError, ValueError):
        raise ValueError(gettext("the position-bias threshold must be a number, got %(value)r")
                         % {"value": value}) from None
    if not 0 <= threshold <= 1:  # also false for NaN
        raise ValueError(gettext("the position-bias threshold must be between 0 and 1."))
    return threshold


# --- serializers --------------------------------------------------------------------------------

class AtdPromptSerializer(serializers.ModelSerializer):
    class Meta:
        model = AtdPrompt
        fields = ["id", "external_id", "messages", "candidate_a", "candidate_b", "candidates_origin", "meta",
                  "source_sha256", "created_at"]


class AtdScoringRunSerializer(serializers.ModelSerializer):
    job = JobSerializer(read_only=True)

    class Meta:
        model = ScoringRun
        fields = ["id", "method", "debias", "model_id", "template_version", "batch_size", "job", "created_at"]


class AtdScoringRunDetailSerializer(AtdScoringRunSerializer):
    scored = serializers.SerializerMethodField()
    pool = serializers.SerializerMethodField()

    class Meta(AtdScoringRunSerializer.Meta):
        fields = [*AtdScoringRunSerializer.Meta.fields, "scored", "pool"]

    def get_scored(self, run: ScoringRun) -> int:
        return selectors.scored_count(run)

    def get_pool(self, run: ScoringRun) -> int:
        return selectors.pool_size(run)


class AtdSelectionSerializer(serializers.ModelSerializer):
    class Meta:
        model = Selection
        fields = ["id", "run", "name", "version", "epsilon", "bias_threshold", "include_biased", "excluded_biased",
                  "size", "recipe", "created_at"]


class AtdTeacherRunSerializer(serializers.ModelSerializer):
    job = JobSerializer(read_only=True)

    class Meta:
        model = TeacherRun
        fields = ["id", "selection", "mode", "model_name", "base_url", "debias", "budget", "model_id", "job",
                  "created_at"]


class AtdTeacherRunDetailSerializer(AtdTeacherRunSerializer):
    counts = serializers.SerializerMethodField()

    class Meta(AtdTeacherRunSerializer.Meta):
        fields = [*AtdTeacherRunSerializer.Meta.fields, "counts"]

    def get_counts(self, run: TeacherRun) -> dict[str, int]:
        return selectors.teacher_counts(run)


class AtdTieCountsSerializer(serializers.Serializer):
    run = serializers.IntegerField(min_value=1, max_value=MAX_ID)
    scored = serializers.IntegerField(min_value=0, max_value=MAX_INT)
    bias_threshold = serializers.FloatField()
    kept = serializers.ListField(child=serializers.DictField(), help_text="per epsilon: kept, fraction, and "
                                 "position_biased (near ties by q left out)")
    histogram = serializers.ListField(child=serializers.DictField())


# --- views ----------------------------------------------------------------------------------------

def _curated_project(request, slug: str):
    project, _ = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
    return project


def _page(request, view, queryset, serializer_class) -> Response:
    """One cursor page of `queryset`, newest first: one page of rows a request, whatever the project's size."""
    paginator = CreatedCursorPagination()
    page = paginator.paginate_queryset(queryset, request, view=view)
    return paginator.get_paginated_response(serializer_class(page, many=True).data)


class AtdImportApi(APIView):
    """Upload a prompt pool as JSONL (field `file`): `{id, prompt | messages, candidates?, meta?}` per line.
    `dry_run` and `skip_bad_lines` are form fields; errors without skip_bad_lines → 400, nothing written."""

    parser_classes = UPLOAD_PARSERS

    @extend_schema(request={"multipart/form-data": OpenApiTypes.OBJECT}, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, slug: str):
        project = _curated_project(request, slug)
        return import_upload(request, importers.import_prompts, project=project, user=request.user)


class AtdPromptListApi(APIView):
    """The prompt pool, newest first (cursor)."""

    @extend_schema(parameters=[OpenApiParameter("cursor", str), OpenApiParameter("page_size", int)],
                   responses=paginated(AtdPromptSerializer), operation_id="v1_projects_atd_prompts_list")
    def get(self, request, slug: str):
        project = _curated_project(request, slug)
        return _page(request, self, selectors.prompts_visible_to(request.user, project, token=request_token(request)),
                     AtdPromptSerializer)


class AtdRunListApi(APIView):
    """Scoring runs of the project, newest first (cursor); POST starts one (a job) and answers 202."""

    @extend_schema(parameters=[OpenApiParameter("cursor", str), OpenApiParameter("page_size", int)],
                   responses=paginated(AtdScoringRunSerializer), operation_id="v1_projects_atd_runs_list")
    def get(self, request, slug: str):
        project = _curated_project(request, slug)
        return _page(request, self, selectors.runs_visible_to(request.user, project, token=request_token(request)),
                     AtdScoringRunSerializer)

    @extend_schema(request=AtdScoringRunCreateSerializer, responses={202: AtdScoringRunSerializer})
    def post(self, request, slug: str):
        project = _curated_project(request, slug)
        data = AtdScoringRunCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = services.start_scoring(project=project, user=request.user, **data.validated_data)
        return Response(AtdScoringRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class AtdRunDetailApi(APIView):
    """One scoring run with its job, how many prompts it has scored and the size of the pool."""

    @extend_schema(responses=AtdScoringRunDetailSerializer)
    def get(self, request, slug: str, run_id: int):
        project = _curated_project(request, slug)
        run = selectors.run_for(request.user, project, run_id, token=request_token(request))
        return Response(AtdScoringRunDetailSerializer(run).data)


class AtdTieCountsApi(APIView):
    """Kept count per epsilon (|q - 0.5| <= epsilon, repeat `epsilon`; position-biased near ties, past
    `bias_threshold`, left out and counted) and the histogram (20 bins) of `histogram`: q, q_ab, q_ba or
    position_bias."""

    @extend_schema(parameters=[OpenApiParameter("epsilon", float, many=True), OpenApiParameter("bias_threshold", float),
                               OpenApiParameter("histogram", str, enum=list(selectors.HISTOGRAM_VALUES))],
                   responses=AtdTieCountsSerializer)
    def get(self, request, slug: str, run_id: int):
        project = _curated_project(request, slug)
        run = selectors.run_for(request.user, project, run_id, token=request_token(request))
        values = request.query_params.getlist("epsilon") or ["0.02"]
        if len(values) > MAX_EPSILONS:
            raise ValidationError({"epsilon": [gettext("At most %(n)s values.") % {"n": MAX_EPSILONS}]})
        try:
            epsilons = [parse_epsilon(value) for value in values]
        except ValueError as exc:  # a query parameter that is not a number: an error on that parameter
            raise ValidationError({"epsilon": [str(exc)]}) from exc
        try:
            threshold = parse_bias_threshold(request.query_params.get("bias_threshold",
                                                                      selectors.DEFAULT_BIAS_THRESHOLD))
        except ValueError as exc:
            raise ValidationError({"bias_threshold": [str(exc)]}) from exc
        value = request.query_params.get("histogram", "q")
        if value not in selectors.HISTOGRAM_VALUES:
            raise ValidationError({"histogram": [gettext("Must be one of %(values)s.") % {
                "values": ", ".join(selectors.HISTOGRAM_VALUES)}]})
        scored = selectors.scored_count(run)
        kept = []
        for epsilon in epsilons:
            n = selectors.kept_count(run, epsilon, threshold)
            kept.append({"epsilon": epsilon, "kept": n, "fraction": n / scored if scored else 0.0,
                         "position_biased": selectors.biased_count(run, epsilon, threshold)})
        return Response({"run": run.pk, "scored": scored, "bias_threshold": threshold, "kept": kept,
                         "histogram": selectors.q_histogram(run, value=value)})


class AtdSelectionListApi(APIView):
    """Frozen selections, newest first (cursor); POST {run, name, epsilon} freezes the next version of `name`."""

    @extend_schema(parameters=[OpenApiParameter("cursor", str), OpenApiParameter("page_size", int)],
                   responses=paginated(AtdSelectionSerializer), operation_id="v1_projects_atd_selections_list")
    def get(self, request, slug: str):
        project = _curated_project(request, slug)
        return _page(request, self,
                     selectors.selections_visible_to(request.user, project, token=request_token(request)),
                     AtdSelectionSerializer)

    @extend_schema(request=AtdSelectionCreateSerializer, responses={201: AtdSelectionSerializer})
    def post(self, request, slug: str):
        project = _curated_project(request, slug)
        data = AtdSelectionCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        runs = selectors.runs_visible_to(request.user, project, token=request_token(request))
        run = runs.filter(pk=data.validated_data["run"]).first()
        if run is None:
            raise ValidationError({"run": [gettext("No such scoring run in this project.")]})
        selection = services.freeze_selection(run=run, user=request.user, **{
            key: data.validated_data[key] for key in ("name", "epsilon", "bias_threshold", "include_biased")})
        return Response(AtdSelectionSerializer(selection).data, status=status.HTTP_201_CREATED)


class AtdTeacherStartApi(APIView):
    """Ask the teacher for one bit per prompt of the selection (a job); 202 with the teacher run."""

    @extend_schema(request=AtdTeacherCreateSerializer, responses={202: AtdTeacherRunSerializer})
    def post(self, request, slug: str, selection_id: int):
        project = _curated_project(request, slug)
        selection = selectors.selection_for(request.user, project, selection_id, token=request_token(request))
        data = AtdTeacherCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = services.start_teacher(selection=selection, user=request.user, **data.validated_data)
        return Response(AtdTeacherRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class AtdTeacherRunApi(APIView):
    """One teacher run with its job and the answers so far by status (ok, tie, invalid)."""

    @extend_schema(responses=AtdTeacherRunDetailSerializer)
    def get(self, request, slug: str, teacher_run_id: int):
        project = _curated_project(request, slug)
        run = selectors.teacher_run_for(request.user, project, teacher_run_id, token=request_token(request))
        return Response(AtdTeacherRunDetailSerializer(run).data)
