"""Error pages: API clients get JSON errors, browsers get HTML.

Django's default 400/404/500 pages are HTML even under /api/, e.g. for a URL no route matches or a
request over Django's size limits; an API client (and the OpenAPI document, checked by tests/fuzz/)
expects `{"detail": ...}` there too.

A database that is briefly unreachable (PostgreSQL restarting) is a 503 that says so, not a 500:
the request saved nothing (its transaction never committed), and the same request can be sent again.
"""

import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.utils.html import escape
from django.views import defaults
from rest_framework.exceptions import Throttled
from rest_framework.response import Response
from rest_framework.views import exception_handler

from dataplatform.broker import BrokerUnavailable
from dataplatform.inference.base import BackendError
from dataplatform.jobs.services import JobQueueFull

logger = logging.getLogger(__name__)

DATABASE_UNAVAILABLE = ("The database is unavailable for a moment, so nothing from this request was saved. "
                        "Everything saved before is safe; try again in a few seconds.")
RETRY_AFTER_SECONDS = "5"


def _is_api(request) -> bool:
    return request.path.startswith("/api/")


def bad_request(request, exception=None):
    """Django's own refusals (SuspiciousOperation), raised when a request is read: DRF lets them through
    its exception handler, so the API's 400s for them are made here."""
    if _is_api(request):
        return JsonResponse({"detail": _refusal_detail(exception)}, status=400)
    return defaults.bad_request(request, exception)


def _refusal_detail(exception) -> str:
    """Which limit the request went over; other SuspiciousOperations (a bad Host header...) are not
    described, as Django's own 400 page does not describe them."""
    if isinstance(exception, RequestDataTooBig):
        return (f"The request body is over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes "
                "(DATA_UPLOAD_MAX_MEMORY_SIZE). The limit is for JSON bodies and form fields; file parts of a "
                "multipart upload do not count, so send large data as a file.")
    if isinstance(exception, TooManyFieldsSent):
        return (f"The request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS:,} form fields or query "
                "parameters (DATA_UPLOAD_MAX_NUMBER_FIELDS).")
    if isinstance(exception, TooManyFilesSent):
        return (f"The request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FILES:,} files "
                "(DATA_UPLOAD_MAX_NUMBER_FILES).")
    return "Bad request."


def not_found(request, exception=None):
    if _is_api(request):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request):
    if _is_api(request):
        return JsonResponse({"detail": "Internal server error."}, status=500)
    return defaults.server_error(request)


def unavailable(exc) -> str | None:
    """What is down, as the answer's message, if `exc` says that a service the request needs is: the
    database, the broker (when a job is started; the job is recorded as failed and can be retried) or the
    model backend (unreachable, or not serving the project's model). None for any other error."""
    if isinstance(exc, (OperationalError, InterfaceError)):
        logger.warning("Database unavailable: %s", exc)
        return DATABASE_UNAVAILABLE
    if isinstance(exc, BrokerUnavailable):
        return str(exc)
    if isinstance(exc, BackendError):
        logger.warning("Model backend unavailable: %s", exc)
        return f"The model backend failed: {exc}"
    return None


def api_exception_handler(exc, context):
    """DRF's handler, plus 503s with Retry-After for what is down (`unavailable`): views need not catch
    those. A full job queue (JobQueueFull) is a 429 with Retry-After, as DRF's own rate limits answer."""
    if isinstance(exc, JobQueueFull):
        exc = Throttled(wait=exc.retry_after_seconds, detail=str(exc))
    response = exception_handler(exc, context)
    if response is not None:
        return response
    if (message := unavailable(exc)) is not None:
        return Response({"detail": message}, status=503, headers={"Retry-After": RETRY_AFTER_SECONDS})
    return None


class ServiceUnavailableMiddleware:
    """The same 503s for pages and htmx requests: a short page the workspace can show as a message."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exc):
        if (message := unavailable(exc)) is None:
            return None
        if _is_api(request):
            response = JsonResponse({"detail": message}, status=503)
        else:
            response = HttpResponse(f"<p class=\"error\">{escape(message)}</p>", status=503)
        response["Retry-After"] = RETRY_AFTER_SECONDS
        return response
