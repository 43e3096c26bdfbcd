"""Jobs API: start a job in a project, list, watch progress, cancel."""

import django_filters
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from dataplatform.accounts.permissions import CAN_RUN_JOBS, CAN_SEE_JOBS, project_for, request_token, require_role
from dataplatform.openapi import VALIDATION_ERROR, error_response

from . import selectors, services
from .inputs import JobCreateSerializer
from .models import Job, JobState


class JobSerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    percent = serializers.IntegerField(read_only=True)

    class Meta:
        model = Job
        fields = [
            "id", "project", "kind", "params", "state", "progress_done", "progress_total", "percent",
            "status_message", "result", "error", "attempts", "heartbeat_at", "created_by", "created_at", "started_at",
            "finished_at",
        ]


class JobFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=JobState.choices)
    kind = django_filters.CharFilter()
    created_after = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Job
        fields = ["state", "kind"]


class ProjectJobsApi(generics.ListAPIView):
    serializer_class = JobSerializer
    filterset_class = JobFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return Job.objects.none()
        token = request_token(self.request)
        project, _ = project_for(self.request.user, self.kwargs["slug"], CAN_SEE_JOBS, token=token)
        return selectors.jobs_of_project(self.request.user, project, token=token)

    @extend_schema(request=JobCreateSerializer, responses={202: JobSerializer})
    def post(self, request, slug: str):
        project, _ = project_for(request.user, slug, CAN_RUN_JOBS, token=request_token(request))
        data = JobCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        job = services.enqueue_job(
            project=project, kind=data.validated_data["kind"], params=data.validated_data["params"],
            user=request.user,
        )
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class JobDetailApi(APIView):
    @extend_schema(responses=JobSerializer)
    def get(self, request, job_id: int):
        return Response(JobSerializer(_job(request, job_id)).data)


class JobCancelApi(APIView):
    @extend_schema(request=None, responses=JobSerializer)
    def post(self, request, job_id: int):
        job = _job(request, job_id)
        require_role(request.user, job.project, CAN_RUN_JOBS, token=request_token(request))
        return Response(JobSerializer(services.cancel_job(job=job)).data)


class JobRetryApi(APIView):
    @extend_schema(request=None, responses={
        202: JobSerializer,
        400: error_response("Only a failed or cancelled job can be retried (`state` says why).",
                            schema=VALIDATION_ERROR)})
    def post(self, request, job_id: int):
        job = _job(request, job_id)
        require_role(request.user, job.project, CAN_RUN_JOBS, token=request_token(request))
        job = services.retry_job(job=job)
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


def _job(request, job_id: int) -> Job:
    return selectors.job_for(request.user, job_id, token=request_token(request))
