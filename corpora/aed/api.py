"""AED over the API: import traces, curate cases and proposals, draft with the model, replay, summarise."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from dataplatform.accounts.permissions import CAN_CURATE, project_for, request_token
from dataplatform.apiutils import import_upload
from dataplatform.jobs.api import JobSerializer
from dataplatform.openapi import STALE_VERSION, error_response
from dataplatform.pagination import CreatedCursorPagination, paginated

from . import evidence_check, importers, selectors, services
from .inputs import (
    CaseEditSerializer,
    GradingSerializer,
    ProposalCreateSerializer,
    ProposalStatusSerializer,
    ReplayCreateSerializer,
    VersionOnlySerializer,
)
from .models import Case, Proposal, Replay, Trace


class TraceSerializer(serializers.ModelSerializer):
    class Meta:
        model = Trace
        fields = ["id", "trace_id", "task_id", "environment", "harness", "policy_model", "passed", "score",
                  "source_format", "created_at"]


class TraceDetailSerializer(TraceSerializer):
    class Meta(TraceSerializer.Meta):
        fields = [*TraceSerializer.Meta.fields, "steps", "tools", "meta", "source_sha256"]


class ReplaySerializer(serializers.ModelSerializer):
    class Meta:
        model = Replay
        fields = ["id", "proposal", "runner", "mode", "retry", "pairs", "seed", "options", "job", "n11", "n10", "n01", "n00",
                  "stats", "created_at"]

    def to_representation(self, replay: Replay) -> dict:
        # Webhook headers usually carry the runner's credentials: write-only, their names shown, never values.
        data = super().to_representation(replay)
        if isinstance(data["options"].get("headers"), dict):
            data["options"] = data["options"] | {"headers": dict.fromkeys(data["options"]["headers"], "(hidden)")}
        return data


class ProposalSerializer(serializers.ModelSerializer):
    replays = ReplaySerializer(many=True, read_only=True)

    class Meta:
        model = Proposal
        fields = ["id", "case", "corrected_action", "rationale", "status", "model_authored", "model_id", "replays",
                  "created_at"]


class CaseSerializer(serializers.ModelSerializer):
    curator = serializers.SlugRelatedField(slug_field="username", read_only=True)
    taxonomy = serializers.StringRelatedField()
    proposals = ProposalSerializer(many=True, read_only=True)
    grade = serializers.SerializerMethodField()

    class Meta:
        model = Case
        fields = ["id", "trace", "curator", "taxonomy", "error_step", "category", "diagnosis", "evidence",
                  "evidence_check", "model_evidence_check", "model_evidence_rationale", "model_evidence_model_id",
                  "status", "model_authored", "diagnosed_by", "diagnosis_model_id", "diagnosis_prompt_version",
                  "version", "grade", "proposals", "created_at", "updated_at"]

    def get_grade(self, case: Case) -> str | None:
        return case.grade  # kept by the services (grades.regrade)


def _curated_project(request, slug: str):
    project, _ = project_for(request.user, slug, CAN_CURATE, token=request_token(request))
    return project


class ImportApi(APIView):
    """Upload traces (field `file`): JSONL of AED steps records, `messages` trajectories, OpenAI chat with tool
    calls, SWE-agent trajectories, OpenHands output lines or SWE Labeler trajectories; or a SWE-agent `.traj`
    file. `dry_run` and `skip_bad_lines` are form fields."""

    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(request={"multipart/form-data": OpenApiTypes.OBJECT}, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, slug: str):
        project = _curated_project(request, slug)
        return import_upload(request, importers.import_traces, project=project, user=request.user)


class TraceListApi(APIView):
    """Traces, newest first (cursor). Filters: environment, harness, policy_model."""

    @extend_schema(parameters=[OpenApiParameter(name, str) for name in ("environment", "harness", "policy_model",
                                                                         "cursor")],
                   responses=paginated(TraceSerializer), operation_id="v1_projects_aed_traces_list")
    def get(self, request, slug: str):
        project = _curated_project(request, slug)
        traces = selectors.traces_visible_to(request.user, project, token=request_token(request))
        for name in ("environment", "harness", "policy_model"):
            if request.query_params.get(name):
                traces = traces.filter(**{name: request.query_params[name]})
        paginator = CreatedCursorPagination()
        page = paginator.paginate_queryset(traces, request, view=self)
        return paginator.get_paginated_response(TraceSerializer(page, many=True).data)


class TraceDetailApi(APIView):
    @extend_schema(responses=TraceDetailSerializer)
    def get(self, request, slug: str, trace_id: int):
        project = _curated_project(request, slug)
        return Response(TraceDetailSerializer(selectors.trace_for(request.user, project, trace_id,
                                                                  token=request_token(request))).data)


class TraceCaseApi(APIView):
    """Your case for this trace (opened on first use)."""

    @extend_schema(request=None, responses=CaseSerializer)
    def post(self, request, slug: str, trace_id: int):
        project = _curated_project(request, slug)
        trace = selectors.trace_for(request.user, project, trace_id, token=request_token(request))
        case = services.open_case(trace=trace, curator=request.user)
        return Response(CaseSerializer(selectors.cases_of(project).get(pk=case.pk)).data)


class SummaryApi(APIView):
    """The corpus dashboard: grades, mean gain with CI, pass rates by arm, categories, breakdowns."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, slug: str):
        project = _curated_project(request, slug)
        return Response({**selectors.corpus_summary(project), "grade_rules": [
            {"grade": g, "rule": text} for g, text in selectors.grading_of(project).rules()]})


class GradingApi(APIView):
    """The project's grading rules; PUT any of them (curators)."""

    @extend_schema(responses=GradingSerializer)
    def get(self, request, slug: str):
        grading = selectors.grading_of(_curated_project(request, slug))
        return Response({"evidence": grading.evidence, "min_pairs": grading.min_pairs, "alpha": grading.alpha,
                         "rules": grading.rules()})

    @extend_schema(request=GradingSerializer, responses=GradingSerializer)
    def put(self, request, slug: str):
        project = _curated_project(request, slug)
        data = GradingSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        services.update_grading(project=project, user=request.user, **data.validated_data)
        return self.get(request, slug)


class CaseApi(APIView):
    """Read a case; PATCH {version, changes} to edit it (stale version → 409)."""

    @extend_schema(responses=CaseSerializer)
    def get(self, request, case_id: int):
        case = selectors.case_for(request.user, case_id, token=request_token(request))
        return Response(CaseSerializer(selectors.cases_of(case.trace.project).get(pk=case.pk)).data)

    @extend_schema(request=CaseEditSerializer, responses={200: CaseSerializer, 409: STALE_VERSION})
    def patch(self, request, case_id: int):
        case = selectors.case_for(request.user, case_id, token=request_token(request))
        data = CaseEditSerializer(data=request.data, context={"case": case})
        data.is_valid(raise_exception=True)
        case = services.update_case(case=case, version=data.validated_data["version"], actor=request.user,
                                    changes=data.validated_data["changes"])
        return Response(CaseSerializer(selectors.cases_of(case.trace.project).get(pk=case.pk)).data)


class CaseSubmitApi(APIView):
    @extend_schema(request=VersionOnlySerializer, responses={200: CaseSerializer, 409: STALE_VERSION})
    def post(self, request, case_id: int):
        case = selectors.case_for(request.user, case_id, token=request_token(request))
        data = VersionOnlySerializer(data=request.data)
        data.is_valid(raise_exception=True)
        case = services.submit_case(case=case, version=data.validated_data["version"], actor=request.user)
        return Response(CaseSerializer(selectors.cases_of(case.trace.project).get(pk=case.pk)).data)


class CaseDraftApi(APIView):
    """Ask the model for a draft diagnosis and correction (a job; the draft is marked model-authored)."""

    @extend_schema(request=None, responses={202: JobSerializer})
    def post(self, request, case_id: int):
        case = selectors.case_for(request.user, case_id, token=request_token(request))
        job = services.start_draft(case=case, user=request.user)
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class CaseCheckEvidenceApi(APIView):
    """Ask the model whether the diagnosis is supported by its evidence (a job); its verdict and rationale are
    stored beside your evidence_check, which confirms or overrides it."""

    @extend_schema(request=None, responses={202: JobSerializer, 400: error_response(
        "The case has no error step or no diagnosis yet: there is nothing to check.")})
    def post(self, request, case_id: int):
        case = selectors.case_for(request.user, case_id, token=request_token(request))
        job = evidence_check.start_evidence_check(case=case, user=request.user)
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class ProposalListApi(APIView):
    @extend_schema(request=ProposalCreateSerializer, responses={201: ProposalSerializer})
    def post(self, request, case_id: int):
        case = selectors.case_for(request.user, case_id, token=request_token(request))
        data = ProposalCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        proposal = services.add_proposal(case=case, actor=request.user, **data.validated_data)
        return Response(ProposalSerializer(proposal).data, status=status.HTTP_201_CREATED)


class ProposalStatusApi(APIView):
    """Accept or reject a proposal; a rejected one is kept, with its status."""

    @extend_schema(request=ProposalStatusSerializer, responses=ProposalSerializer)
    def post(self, request, proposal_id: int):
        proposal = selectors.proposal_for(request.user, proposal_id, token=request_token(request))
        data = ProposalStatusSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        proposal = services.set_proposal_status(proposal=proposal, status=data.validated_data["status"],
                                                actor=request.user)
        return Response(ProposalSerializer(proposal).data)


class ReplayCreateApi(APIView):
    """Schedule a two-arm replay of a proposal: N seeded pairs from the checkpoint before the error step."""

    @extend_schema(request=ReplayCreateSerializer, responses={202: ReplaySerializer})
    def post(self, request, proposal_id: int):
        proposal = selectors.proposal_for(request.user, proposal_id, token=request_token(request))
        data = ReplayCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        replay = services.start_replay(proposal=proposal, user=request.user, **data.validated_data)
        return Response(ReplaySerializer(replay).data, status=status.HTTP_202_ACCEPTED)


class ReplayApi(APIView):
    @extend_schema(responses=ReplaySerializer)
    def get(self, request, replay_id: int):
        return Response(ReplaySerializer(selectors.replay_for(request.user, replay_id,
                                                              token=request_token(request))).data)
