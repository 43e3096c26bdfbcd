from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from .selectors import platform_status


class SystemStatusApi(APIView):
    @extend_schema(
        summary="Health of database, broker, workers and model backend",
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
