from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from dataplatform.openapi import error_response

from . import services
from .selectors import last_capability_report, platform_status


class SystemStatusApi(APIView):
    @extend_schema(
        summary="Health of database, broker, workers, model backend and export storage",
        responses=inline_serializer("SystemStatus", {
            "ok": serializers.BooleanField(),
            "services": serializers.ListField(child=serializers.DictField()),
        }),
    )
    def get(self, request):
        statuses = platform_status()
        return Response({
            "ok": all(s.ok for s in statuses),
            "services": [{"name": s.name, "ok": s.ok, "detail": s.detail, **s.facts} for s in statuses],
        })


CAPABILITY_REPORT = inline_serializer("CapabilityReport", {
    "ok": serializers.BooleanField(allow_null=True, help_text="null before the first check"),
    "checked_at": serializers.DateTimeField(allow_null=True),
    "backend": serializers.CharField(allow_null=True),
    "model": serializers.CharField(allow_null=True),
    "top_k": serializers.IntegerField(allow_null=True, help_text="the top-k logprobs the check asked for"),
    "capabilities": serializers.ListField(child=inline_serializer("Capability", {
        "name": serializers.CharField(),
        "label": serializers.CharField(),
        "feature": serializers.CharField(help_text="the vLLM flag or API field it is about"),
        "ok": serializers.BooleanField(allow_null=True, help_text="null: not checked, or not knowable"),
        "verdict": serializers.ChoiceField(["PASS", "FAIL", "INFO"]),
        "seen": serializers.CharField(),
        "fix": serializers.CharField(allow_null=True, help_text="for a FAIL: the flag or setting to change"),
    })),
})


def _report(report) -> dict:
    if report is None:
        return {"ok": None, "checked_at": None, "backend": None, "model": None, "top_k": None, "capabilities": []}
    return {"ok": report.ok, "checked_at": report.checked_at, "backend": report.backend, "model": report.model,
            "top_k": report.top_k, "capabilities": [
                {"name": c.name, "label": c.label, "feature": c.feature, "ok": c.ok, "verdict": c.verdict,
                 "seen": c.seen.english(), "fix": c.fix.english() if c.fix else None}
                for c in report.capabilities]}


class SystemCapabilitiesApi(APIView):
    @extend_schema(summary="The last check of what the platform needs of the model server", responses=CAPABILITY_REPORT)
    def get(self, request):
        return Response(_report(last_capability_report()))

    @extend_schema(summary="Check what the platform needs of the model server, now (a few model calls)",
                   request=None, responses={200: CAPABILITY_REPORT, 409: error_response(
                       "A check is running already; its report is the next GET's once it ends.")})
    def post(self, request):
        return Response(_report(services.run_capability_check()))
