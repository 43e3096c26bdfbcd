"""Errors told apart, end to end through Django's handlers (dataplatform/errors.py).

A query the database refuses is a bug: a 500 whose short reference the user sees (a page in the site's layout,
an htmx fragment, or JSON under /api/) and an operator finds in one ERROR record with the traceback. A database
that cannot be reached is a 503 with Retry-After, and its page does not ask the database again.

The views below fail for real: one runs SQL calling a function no backend has, the other connects where no
database listens. This module is their URLconf, in front of the site's own (the layout links to its pages)."""

import copy
import logging
import re
import sqlite3
import tempfile
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import DatabaseError, OperationalError, connection, transaction
from django.db.utils import load_backend
from django.test import AsyncClient, Client, RequestFactory
from django.test.utils import CaptureQueriesContext
from django.urls import path
from django.utils import translation
from rest_framework.views import APIView

from dataplatform import urls as site_urls
from dataplatform.errors import DATABASE_UNAVAILABLE, REQUEST_TOO_SLOW, database_unavailable, server_error

from .factories import UserFactory
from .net import closed_port

pytestmark = [pytest.mark.django_db, pytest.mark.urls(__name__)]

MISSING_FUNCTION = "no_such_function_for_error_tests"


def run_a_broken_query():
    # In a savepoint, as a service's writes run: on PostgreSQL the test's own transaction stays usable.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SELECT {MISSING_FUNCTION}()")


def connect_where_no_database_listens():
    """Raises what Django raises when the database is down: PostgreSQL refusing the connection (stopped, or
    restarting), or SQLite unable to open its file (its disk gone). A connection of its own, so the test's
    database stays up."""
    where = copy.deepcopy(connection.settings_dict)
    if connection.vendor == "postgresql":
        where.update(ENGINE="django.db.backends.postgresql", HOST="127.0.0.1", PORT=closed_port(),
                     OPTIONS={"connect_timeout": 5})
    else:
        where.update(ENGINE="django.db.backends.sqlite3", OPTIONS={},
                     NAME=str(Path(tempfile.gettempdir()) / "no-such-folder-for-error-tests" / "db.sqlite3"))
    down = load_backend(where["ENGINE"]).DatabaseWrapper(where, alias="down")
    try:
        down.ensure_connection()
    finally:
        down.close()


def broken_page(request):
    run_a_broken_query()


def run_a_slow_query():
    """What PostgreSQL raises at the web process's statement timeout (settings/database.py), set here on this
    statement's transaction only: the test database has no timeout."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL statement_timeout = '20ms'")
        cursor.execute("SELECT pg_sleep(2)")


def slow_page(request):
    run_a_slow_query()


class SlowApi(APIView):
    authentication_classes = permission_classes = ()

    def get(self, request):
        run_a_slow_query()


class BrokenApi(APIView):
    authentication_classes = permission_classes = ()

    def get(self, request):
        run_a_broken_query()


def down_page(request):
    connect_where_no_database_listens()


class DownApi(APIView):
    authentication_classes = permission_classes = ()

    def get(self, request):
        connect_where_no_database_listens()


urlpatterns = [
    path("broken/", broken_page),
    path("broken/signed-in/", login_required(broken_page)),
    path("api/v1/broken/", BrokenApi.as_view()),
    path("down/", down_page),
    path("api/v1/down/", DownApi.as_view()),
    path("slow/", slow_page),
    path("api/v1/slow/", SlowApi.as_view()),
    *site_urls.urlpatterns,
]
handler500 = site_urls.handler500

SHAPES = {  # the request, and where its answer shows the reference
    "page": ("/broken/", {}, lambda r: re.search(r'<code translate="no">([0-9a-f]+)</code>', r.text).group(1)),
    "htmx": ("/broken/", {"HX-Request": "true"},
             lambda r: re.search(r'<code translate="no">([0-9a-f]+)</code>', r.text).group(1)),
    "api": ("/api/v1/broken/", {}, lambda r: r.json()["reference"]),
}


def client(**kwargs) -> Client:
    return Client(raise_request_exception=False, **kwargs)


def error_records(caplog) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.levelno >= logging.ERROR]


def in_chinese(text: str) -> str:
    with translation.override("zh-hans"):
        translated = translation.gettext(text)
    assert translated != text, f"{text!r} has no Chinese translation to look for"
    return translated


@pytest.mark.parametrize("shape", SHAPES)
def test_a_query_the_database_refuses_is_a_500_whose_reference_is_logged_with_the_traceback(shape, caplog):
    url, headers, reference_in = SHAPES[shape]
    response = client().get(url, headers=headers)
    assert response.status_code == 500
    reference = reference_in(response)
    assert 8 <= len(reference) <= 12
    # One ERROR record for the failure, holding both the reference and the traceback: what an operator greps.
    [record] = error_records(caplog)
    assert record.name == "django.request" and reference in record.getMessage() and url in record.getMessage()
    assert isinstance(record.exc_info[1], DatabaseError)
    logged = logging.Formatter().format(record)
    assert "Traceback (most recent call last)" in logged and MISSING_FUNCTION in logged
    # The user gets the reference, never the bug (DEBUG is off, as in production).
    assert not settings.DEBUG and MISSING_FUNCTION not in response.text and "Traceback" not in response.text
    if shape == "api":
        assert set(response.json()) == {"detail", "reference"}
    elif shape == "htmx":  # swapped into the page that asked: a fragment, not a second layout
        assert response.text.startswith('<p class="error">') and "<html" not in response.text
    else:
        assert '<header class="topbar">' in response.text


def test_each_failure_has_its_own_reference(caplog):
    browser = client()
    first, second = (SHAPES["api"][2](browser.get("/api/v1/broken/")) for _ in range(2))
    assert first != second
    assert [first in r.getMessage() for r in error_records(caplog)] == [True, False]


def test_the_500_page_is_in_the_sites_layout_and_the_users_language(caplog):
    user = UserFactory(username="ada")
    browser = client()
    browser.force_login(user)
    browser.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"  # the language switch's choice
    response = browser.get("/broken/signed-in/")
    assert response.status_code == 500
    page = response.text
    assert '<html lang="zh-hans">' in page
    assert in_chinese("Server error (500)") in page and in_chinese("Back to the projects") in page
    # The header the view's request already knew: the brand, the navigation and who is signed in.
    assert in_chinese("Data platform") in page and in_chinese("Projects") in page and ">ada</span>" in page
    assert SHAPES["page"][2](response) in error_records(caplog)[0].getMessage()


def test_under_asgi_the_500_keeps_its_reference_traceback_and_language(caplog):
    """Production's shape: uvicorn runs Django's ASGI handler, which calls handler500 in another thread."""
    browser = AsyncClient(raise_request_exception=False)
    browser.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    response = async_to_sync(browser.get)("/broken/")
    assert response.status_code == 500
    reference = SHAPES["page"][2](response)
    assert '<html lang="zh-hans">' in response.text and in_chinese("Server error (500)") in response.text
    [record] = error_records(caplog)
    assert reference in record.getMessage() and MISSING_FUNCTION in logging.Formatter().format(record)


def test_a_layout_that_fails_leaves_a_plain_page_with_the_reference(monkeypatch, caplog):
    def broken_template(*args, **kwargs):
        raise RuntimeError("the template broke")

    monkeypatch.setattr("dataplatform.errors.render_to_string", broken_template)
    response = client().get("/broken/")
    assert response.status_code == 500
    reference = SHAPES["page"][2](response)
    assert "the template broke" not in response.text and MISSING_FUNCTION not in response.text
    failure = next(r for r in error_records(caplog) if reference in r.getMessage())
    assert MISSING_FUNCTION in logging.Formatter().format(failure)  # still the request's bug, not the template's


@pytest.mark.parametrize("url, headers", [("/down/", {}), ("/down/", {"HX-Request": "true"}), ("/api/v1/down/", {})],
                         ids=["page", "htmx", "api"])
def test_a_database_that_is_down_is_a_503_with_retry_after(url, headers):
    browser = client()
    browser.force_login(UserFactory())  # a session the page could look up, and must not
    with CaptureQueriesContext(connection) as queries:
        response = browser.get(url, headers=headers)
    assert response.status_code == 503 and int(response["Retry-After"]) > 0
    said = str(DATABASE_UNAVAILABLE)
    if url.startswith("/api/"):
        assert response.json() == {"detail": said}
    elif headers:
        assert response.text.startswith('<p class="error">') and said in response.text and "<html" not in response.text
    else:
        assert '<header class="topbar">' in response.text and said in response.text
        assert 'href="/down/"' in response.text  # try again: the same page
    assert len(queries) == 0  # the answer did not ask the database again (who is signed in, stored messages)


def test_a_database_that_is_down_when_a_middleware_asks_it_is_a_503_too():
    """A session saved after the database went away fails in SessionMiddleware, past PlatformErrorMiddleware:
    handler500 tells it apart as well."""
    request = RequestFactory().get("/projects/")
    try:
        try:
            raise sqlite3.OperationalError("database is locked")
        except sqlite3.OperationalError as exc:
            raise OperationalError(*exc.args) from exc
    except OperationalError as exc:
        assert database_unavailable(exc)
        response = server_error(request)
    assert response.status_code == 503 and response["Retry-After"] and str(DATABASE_UNAVAILABLE) in response.text


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite has no statement timeout")
@pytest.mark.parametrize("url, headers", [("/slow/", {}), ("/slow/", {"HX-Request": "true"}), ("/api/v1/slow/", {})],
                         ids=["page", "htmx", "api"])
def test_a_statement_stopped_at_the_web_timeout_is_a_503_that_says_so(url, headers, settings, caplog):
    """A pathological filter answers a clear 503 instead of holding a server thread and a connection."""
    settings.WEB_STATEMENT_TIMEOUT_SECONDS = 5
    response = client().get(url, headers=headers)
    said = str(REQUEST_TOO_SLOW) % {"seconds": "5"}
    assert response.status_code == 503 and int(response["Retry-After"]) > 0
    assert (response.json() == {"detail": said}) if url.startswith("/api/") else said in response.text
    assert not any(record.exc_info for record in error_records(caplog))  # a ceiling reached, not a bug
