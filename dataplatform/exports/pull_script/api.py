"""GET /api/v1/exports/pull-script: the stand-alone pull script, as the file in the repository.

Public: it is the project's own source code and holds no secret and no data, and a trainer's machine can
fetch it before a token is set up on it. It authenticates nobody, so a token sent with it is ignored.
"""

from pathlib import Path

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.permissions import AllowAny
from rest_framework.views import APIView

SCRIPT = Path(__file__).with_name("dataplatform_pull.py")
CONTENT_TYPE = "text/x-python"


class OneRepresentation(BaseContentNegotiation):
    """The script is only ever Python source: any Accept header gets it (never a 406)."""

    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class PullScriptApi(APIView):
    """Download dataplatform_pull.py, the pull client that needs only Python's standard library."""

    authentication_classes = []
    permission_classes = [AllowAny]
    content_negotiation_class = OneRepresentation

    @extend_schema(responses={(200, CONTENT_TYPE): OpenApiTypes.STR})
    def get(self, request):
        response = HttpResponse(SCRIPT.read_bytes(), content_type=f"{CONTENT_TYPE}; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{SCRIPT.name}"'
        return response
