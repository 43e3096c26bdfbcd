"""Error pages: API clients get JSON errors, browsers get HTML.

Django's default 404/500 pages are HTML even under /api/, e.g. for a URL no route matches; an API
client (and the OpenAPI document, checked by tests/fuzz/) expects `{"detail": ...}` there too.
"""

from django.http import JsonResponse
from django.views import defaults


def _is_api(request) -> bool:
    return request.path.startswith("/api/")


def not_found(request, exception=None):
    if _is_api(request):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request):
    if _is_api(request):
        return JsonResponse({"detail": "Internal server error."}, status=500)
    return defaults.server_error(request)
