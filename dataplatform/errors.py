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

Anything else a request lets through is a bug: a 500 with a short reference (`server_error`), logged once at
ERROR on `django.request` with its traceback, and shown to the user so they can quote it to an operator.

Every error has the same three shapes: JSON under /api/, an escaped fragment for htmx (it is swapped into
the page that asked), and for a full-page navigation a page in the site's layout, in the user's language.
"""

import logging
import secrets
import sqlite3
import sys

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.utils.functional import empty
from django.utils.html import escape
from django.utils.log import log_response
from django.utils.translation import get_language, gettext_lazy
from django.utils.translation import gettext as _
from django.views import defaults
from psycopg.errors import QueryCanceled


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

REQUEST_TOO_SLOW = gettext_lazy("This request took longer than the %(seconds)s seconds a page may take, so it "
                                "was stopped and nothing from it was saved. Narrow the filter or the search, or "
                                "try again later.")
DATABASE_UNAVAILABLE = gettext_lazy("The database is unavailable for a moment, so nothing from this request was "
                                    "saved. Everything saved before is safe; try again in a few seconds.")


def _is_api(request) -> bool:
    return request.path.startswith("/api/")


def _is_htmx(request) -> bool:
    return bool(request.headers.get("HX-Request"))


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


def new_reference() -> str:
    """Ten hex digits: short enough to read out over the phone, and 40 random bits, so two failures in the
    logs an operator searches do not share one."""
    return secrets.token_hex(5)


def server_error(request):
    """handler500: whatever a request let through, from its view or from a middleware (Django calls this
    inside its `except`, so the exception is at hand; with DEBUG on it shows its own page instead).

    A bug gets a reference, logged with its traceback in one record on `django.request`, where Django would
    have logged it (and `log_response` marks the answer logged, so Django does not log it a second time
    without the reference). A platform error a middleware raised (a session saved after the database went
    away) gets the answer PlatformErrorMiddleware gives a view's."""
    exc = sys.exc_info()[1]
    if exc is not None and (error := as_platform_error(exc)) is not None:
        response = platform_error_response(request, error)
        log_response("%s: %s", response.reason_phrase, request.path, response=response, request=request)
        return response
    reference = new_reference()
    message = _("Something went wrong on our side and the request was not completed. It has been logged; "
                "try again in a moment.")
    if _is_api(request):
        response = JsonResponse({"detail": _("Internal server error."), "reference": reference}, status=500)
    elif _is_htmx(request):
        response = HttpResponse(_fragment(message, reference), status=500)
    else:
        response = HttpResponse(_page(request, status=500, message=message, reference=reference), status=500)
    log_response("Internal Server Error: %s %s (reference %s)", request.method, request.path, reference,
                 response=response, request=request, exception=exc)
    return response


def platform_error_response(request, error: PlatformError) -> HttpResponse:
    """`error` as the answer to `request`: its body as JSON under /api/, its message as a fragment for htmx,
    else as a page in the site's layout; Retry-After when it has one."""
    if _is_api(request):
        response = JsonResponse(error.body(), status=error.status)
    elif _is_htmx(request):
        response = HttpResponse(_fragment(error.detail), status=error.status)
    else:
        page = _page(request, status=error.status, message=error.detail,
                     retry=bool(error.retry_after) and request.method == "GET")
        response = HttpResponse(page, status=error.status)
    for name, value in _headers(error).items():
        response[name] = value
    return response


TITLES = {
    400: gettext_lazy("Bad Request (400)"), 403: gettext_lazy("Not allowed (403)"),
    404: gettext_lazy("Not found (404)"), 409: gettext_lazy("Conflict (409)"),
    429: gettext_lazy("Too many requests (429)"), 500: gettext_lazy("Server error (500)"),
    503: gettext_lazy("Unavailable (503)"),
}
REFERENCE_LABEL = gettext_lazy("If it happens again, give an operator this reference:")


def _title(status: int) -> str:
    return str(TITLES.get(status) or TITLES[400 if status < 500 else 500])


def _fragment(message: str, reference: str | None = None) -> str:
    """What htmx swaps in where the answer was to go (the pages show it as a message)."""
    quoted = f' {escape(REFERENCE_LABEL)} <code translate="no">{escape(reference)}</code>' if reference else ""
    return f"<p class=\"error\">{escape(message)}{quoted}</p>"


def _page(request, *, status: int, message: str, reference: str | None = None, retry: bool = False) -> str:
    """The error as a page in the site's layout, in the active language (LocaleMiddleware has run).

    It never asks the database: the database may be what failed, and under ASGI handler500 runs in a thread
    whose connections no request closes. So the header shows the user only if the request had already loaded
    them, and no stored messages (they wait for the next page). If the layout fails anyway, a plain page."""
    from django.contrib.auth.models import AnonymousUser

    user = getattr(request, "user", None)
    if getattr(user, "_wrapped", None) is empty:  # a SimpleLazyObject not evaluated yet
        user = None
    context = {"title": _title(status), "message": message, "reference": reference, "retry": retry,
               "user": user or AnonymousUser(), "messages": ()}
    try:
        return render_to_string("error.html", context, request=request)
    except Exception:
        logger.exception("The error page could not be rendered in the site's layout; answered a plain page")
    return _plain_page(status=status, message=message, reference=reference)


def _plain_page(*, status: int, message: str, reference: str | None) -> str:
    """No template, no request: nothing here can fail."""
    quoted = f'<p>{escape(REFERENCE_LABEL)} <code translate="no">{escape(reference)}</code></p>' if reference else ""
    title = escape(_title(status))
    return (f'<!doctype html><html lang="{escape(get_language() or settings.LANGUAGE_CODE)}"><meta charset="utf-8">'
            f"<title>{title}</title><h1>{title}</h1><p>{escape(message)}</p>{quoted}"
            f'<p><a href="/">{escape(_("Back to the projects"))}</a></p></html>')


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


def statement_timed_out(exc) -> bool:
    """Whether `exc` is PostgreSQL stopping a statement at the web's statement timeout (settings/database.py)."""
    return isinstance(exc, OperationalError) and isinstance(exc.__cause__, QueryCanceled)


def as_platform_error(exc) -> PlatformError | None:
    """`exc` in the vocabulary above, if it is one (a database that went away is an Unavailable too; a query
    the database refuses is a bug, left to Django as a 500 logged with its traceback)."""
    if statement_timed_out(exc):
        logger.warning("Statement stopped at the web's statement timeout: %s", exc)
        return Unavailable(str(REQUEST_TOO_SLOW) % {"seconds": f"{settings.WEB_STATEMENT_TIMEOUT_SECONDS:g}"})
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
    fragment htmx shows as a message, a page in the site's layout for a full-page navigation (JSON under
    /api/)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exc):
        if (error := as_platform_error(exc)) is None:
            return None
        return platform_error_response(request, error)
