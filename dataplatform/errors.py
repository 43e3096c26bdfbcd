"""Error pages: API clients get JSON errors, browsers get HTML.

Django's default 404/500 pages are HTML even under /api/, e.g. for a URL no route matches; an API
client (and the OpenAPI document, checked by tests/fuzz/) expects `{"detail": ...}` there too.

A database that is briefly unreachable (PostgreSQL restarting) is a 503 that says so, not a 500:
the request saved nothing (its transaction never committed), and the same request can be sent again.
"""

import logging

from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.utils.html import escape
from django.views import defaults
from rest_framework.response import Response
from rest_framework.views import exception_handler

from dataplatform.broker import BrokerUnavailable

logger = logging.getLogger(__name__)

DATABASE_UNAVAILABLE = ("The database is unavailable for a moment, so nothing from this request was saved. "
                        "Everything saved before is safe; try again in a few seconds.")
RETRY_AFTER_SECONDS = "5"


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


def _database_unavailable(exc) -> bool:
    if isinstance(exc, (OperationalError, InterfaceError)):
        logger.warning("Database unavailable: %s", exc)
        return True
    return False


def api_exception_handler(exc, context):
    """DRF's handler, plus 503s for what is briefly down: the database (with Retry-After), or the
    broker when a job is started (its message names the broker; the job is recorded as failed and can
    be retried). Views need not catch either."""
    response = exception_handler(exc, context)
    if response is not None:
        return response
    if _database_unavailable(exc):
        return Response({"detail": DATABASE_UNAVAILABLE}, status=503, headers={"Retry-After": RETRY_AFTER_SECONDS})
    if isinstance(exc, BrokerUnavailable):
        return Response({"detail": str(exc)}, status=503)
    return None


class DatabaseUnavailableMiddleware:
    """The same for pages and htmx requests: a short 503 page the workspace can show as a message."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exc):
        if not _database_unavailable(exc):
            return None
        if _is_api(request):
            response = JsonResponse({"detail": DATABASE_UNAVAILABLE}, status=503)
        else:
            response = HttpResponse(f"<p class=\"error\">{escape(DATABASE_UNAVAILABLE)}</p>", status=503)
        response["Retry-After"] = RETRY_AFTER_SECONDS
        return response
