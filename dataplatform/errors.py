"""The platform's error vocabulary, and the one place it becomes HTTP.

Services raise the errors below (each app subclasses them: AnnotationError is a Refused, StaleLabel a
Conflict, BackendUnavailable a Transient...). `api_exception_handler` turns them into JSON answers for
DRF views, and `PlatformErrorMiddleware` into short HTML answers for pages and htmx requests that did
not handle them themselves: no view needs a try/except to get the right status.

| error        | status | meaning                                                                 |
|--------------|--------|-------------------------------------------------------------------------|
| Refused      | 400    | the request cannot be done as it stands; sending it again changes nothing |
| Conflict     | 409    | the object changed since the client read it, or is busy: reload         |
| Forbidden    | 403    | the caller may see this but their role may not do it                    |
| Missing      | 404    | no such object (or not one the caller may see)                          |
| Overloaded   | 429    | too much is waiting already: try again after Retry-After                |
| Unavailable  | 503    | a service the request needs is down: try again after Retry-After        |

`Transient` (an Unavailable) is down only for a moment: a job meeting one is retried with backoff.

Django's default 400/404/500 pages are HTML even under /api/, e.g. for a URL no route matches or a
request over Django's size limits; an API client (and the OpenAPI document, checked by tests/fuzz/)
expects `{"detail": ...}` there too.

A database that is briefly unreachable (PostgreSQL restarting) is a 503 that says so, not a 500:
the request saved nothing (its transaction never committed), and the same request can be sent again.
"""

import logging
import sqlite3

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.utils.html import escape
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views import defaults


class PlatformError(Exception):
    """An error a service raises for its caller to see. Its message is the answer's `detail`; `field`
    names the input it is about, when it is about one (the answer is then `{field: [message]}`)."""

    status = 400
    retry_after: int | None = None  # seconds, sent as Retry-After
    field: str | None = None

    def __init__(self, message: str = "", *, field: str | None = None):
        super().__init__(message)
        if field is not None:
            self.field = field

    @property
    def detail(self) -> str:
        return str(self)

    def body(self) -> dict:
        return {self.field: [self.detail]} if self.field else {"detail": self.detail}


class Refused(PlatformError):
    status = 400


class Conflict(PlatformError):
    status = 409


class Forbidden(PlatformError):
    status = 403


class Missing(PlatformError):
    status = 404


class Overloaded(PlatformError):
    status = 429
    retry_after = 30


class Unavailable(PlatformError):
    status = 503
    retry_after = 5


class Transient(Unavailable):
    """Down for a moment (a timeout, a refused connection, a 5xx): worth retrying."""


logger = logging.getLogger(__name__)

DATABASE_UNAVAILABLE = gettext_lazy("The database is unavailable for a moment, so nothing from this request was "
                                    "saved. Everything saved before is safe; try again in a few seconds.")


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
        return _("The request body is over %(limit)s bytes (DATA_UPLOAD_MAX_MEMORY_SIZE). The limit is for JSON "
                 "bodies and form fields; file parts of a multipart upload do not count, so send large data as a "
                 "file.") % {"limit": f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,}"}
    if isinstance(exception, TooManyFieldsSent):
        return _("The request has more than %(limit)s form fields or query parameters "
                 "(DATA_UPLOAD_MAX_NUMBER_FIELDS).") % {"limit": f"{settings.DATA_UPLOAD_MAX_NUMBER_FIELDS:,}"}
    if isinstance(exception, TooManyFilesSent):
        return _("The request has more than %(limit)s files (DATA_UPLOAD_MAX_NUMBER_FILES).") % {
            "limit": f"{settings.DATA_UPLOAD_MAX_NUMBER_FILES:,}"}
    return _("Bad request.")


def not_found(request, exception=None):
    if _is_api(request):
        return JsonResponse({"detail": _("Not found.")}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request):
    if _is_api(request):
        return JsonResponse({"detail": _("Internal server error.")}, status=500)
    return defaults.server_error(request)


def show_error(request, error: PlatformError) -> None:
    """For a page that redirects after a refused form: the error as the next page's messages, one line per
    problem of its answer (a field's problems as "field: ...")."""
    from django.contrib import messages

    for line in _lines(error.body()):
        messages.error(request, line)


def _lines(body: dict):
    for key, value in body.items():
        if key == "detail":
            yield str(value)
        elif isinstance(value, dict):
            yield from _lines(value)
        elif isinstance(value, list):
            yield f"{key}: {' '.join(str(item) for item in value)}"
        else:
            yield f"{key}: {value}"


# SQLite raises OperationalError for its programming errors too (no such function, table or column, a syntax
# error): only these of its messages say that the database itself could not serve the request.
SQLITE_UNAVAILABLE = ("database is locked", "database table is locked", "unable to open database", "disk i/o error")


def database_unavailable(exc) -> bool:
    """Whether `exc` says the database could not serve the request (a lost or refused connection, a server
    that went away, SQLite locked past its timeout), rather than that the request's query is wrong."""
    if isinstance(exc, InterfaceError):
        return True
    if not isinstance(exc, OperationalError):
        return False
    if isinstance(exc.__cause__, sqlite3.Error):
        return any(words in str(exc).lower() for words in SQLITE_UNAVAILABLE)
    return True


def as_platform_error(exc) -> PlatformError | None:
    """`exc` in the vocabulary above, if it is one (a database that went away is an Unavailable too; a query
    the database refuses is a bug, left to Django as a 500 logged with its traceback)."""
    if database_unavailable(exc):
        logger.warning("Database unavailable: %s", exc)
        return Unavailable(str(DATABASE_UNAVAILABLE))
    if isinstance(exc, Unavailable):
        logger.warning("Unavailable: %s", exc.detail)
    return exc if isinstance(exc, PlatformError) else None


def _headers(error: PlatformError) -> dict:
    return {"Retry-After": str(error.retry_after)} if error.retry_after else {}


def api_exception_handler(exc, context):
    """DRF's handler, plus the platform's errors: views need not catch them."""
    # DRF is imported here, not at the top: models and services import this module for the vocabulary,
    # and importing DRF's views loads the authentication classes, which need the apps to be ready.
    from rest_framework.response import Response
    from rest_framework.views import exception_handler

    response = exception_handler(exc, context)
    if response is not None:
        return response
    if (error := as_platform_error(exc)) is not None:
        return Response(error.body(), status=error.status, headers=_headers(error))
    return None


class PlatformErrorMiddleware:
    """The same answers for pages and htmx requests that let a platform error through: a short HTML
    fragment the workspace and the htmx pages show as a message (JSON under /api/)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exc):
        if (error := as_platform_error(exc)) is None:
            return None
        if _is_api(request):
            response = JsonResponse(error.body(), status=error.status)
        else:
            response = HttpResponse(f"<p class=\"error\">{escape(error.detail)}</p>", status=error.status)
        for name, value in _headers(error).items():
            response[name] = value
        return response
