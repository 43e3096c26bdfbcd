"""The error vocabulary (dataplatform/errors.py) and the one place it becomes HTTP: every kind gets its
status, body and Retry-After from the DRF handler and, for pages, from the middleware."""

import json
import sqlite3
from types import SimpleNamespace

import pytest
from django.db import OperationalError
from django.test import RequestFactory

from annotate.services import AnnotationError, StaleVersion
from corpora.aed.services import CurationError, StaleCase
from corpora.atd.services import AtdError
from dataplatform.broker import BrokerUnavailable
from dataplatform.errors import (
    Conflict,
    Missing,
    Overloaded,
    PlatformErrorMiddleware,
    Refused,
    Transient,
    Unavailable,
    api_exception_handler,
)
from dataplatform.inference import BackendError, BackendUnavailable
from dataplatform.jobs.services import InvalidJobParams, JobQueueFull
from labeler.services import LabelingError, StaleLabel


@pytest.mark.parametrize(("error", "status", "retry_after"), [
    (Refused("no"), 400, None), (Conflict("changed"), 409, None), (Missing("gone"), 404, None),
    (Overloaded("full"), 429, "30"), (Unavailable("down"), 503, "5"), (Transient("blip"), 503, "5"),
])
def test_each_kind_has_its_status_and_retry_after(error, status, retry_after):
    response = api_exception_handler(error, {})
    assert response.status_code == status and response.data == {"detail": str(error)}
    assert response.headers.get("Retry-After") == retry_after


@pytest.mark.parametrize(("error", "status"), [
    (AnnotationError("x"), 400), (StaleVersion("x"), 409), (LabelingError("x"), 400), (StaleLabel("x"), 409),
    (CurationError("x"), 400), (StaleCase("x"), 409), (AtdError("x"), 400),
    (JobQueueFull(project=SimpleNamespace(name="P"), limit=3), 429), (BrokerUnavailable("x"), 503), (BackendError("x"), 503),
    (BackendUnavailable("x"), 503),
])
def test_every_apps_errors_are_kinds_of_the_vocabulary(error, status):
    assert error.status == status


def test_a_retried_job_is_one_whose_error_is_transient():
    assert issubclass(BackendUnavailable, Transient) and not issubclass(BackendError, Transient)
    assert not issubclass(BrokerUnavailable, Transient)  # a job that cannot be published is failed at once


def test_an_error_about_a_field_answers_on_that_field():
    assert api_exception_handler(Refused("must be a number", field="seed"), {}).data == {"seed": ["must be a number"]}
    assert api_exception_handler(InvalidJobParams({"n": ["too big"]}), {}).data == {"params": {"n": ["too big"]}}


def test_the_backend_says_it_is_the_model_backend():
    assert api_exception_handler(BackendError("HTTP 404"), {}).data == {"detail": "The model backend failed: HTTP 404"}


def test_a_database_that_went_away_is_a_503_that_says_nothing_was_saved():
    response = api_exception_handler(OperationalError("the connection was closed"), {})
    assert response.status_code == 503 and "nothing from this request was saved" in response.data["detail"]


def test_anything_else_is_left_to_django_as_a_server_error():
    assert api_exception_handler(KeyError("a bug"), {}) is None


@pytest.mark.parametrize(("path", "headers"), [
    ("/projects/alpha/", {}), ("/projects/alpha/", {"HX-Request": "true"}), ("/api/v1/projects/alpha/", {}),
], ids=["page", "htmx", "api"])
def test_a_page_that_lets_an_error_through_gets_its_status_escaped_and_json_under_the_api(path, headers):
    middleware = PlatformErrorMiddleware(lambda request: None)
    response = middleware.process_exception(RequestFactory().get(path, headers=headers), Overloaded("<b>full</b>"))
    assert response.status_code == 429 and response["Retry-After"] == "30"
    if path.startswith("/api/"):
        assert json.loads(response.content) == {"detail": "<b>full</b>"}
    elif headers:  # htmx swaps it into the page that asked
        assert response.content.decode() == '<p class="error">&lt;b&gt;full&lt;/b&gt;</p>'
    else:  # a full-page navigation: the site's layout around the message
        page = response.content.decode()
        assert '<header class="topbar">' in page and "&lt;b&gt;full&lt;/b&gt;" in page and "<b>full" not in page
    assert middleware.process_exception(RequestFactory().get(path), KeyError("a bug")) is None


def _driver_error(driver_exc) -> OperationalError:
    """An OperationalError as Django raises it: the driver's exception as its cause."""
    try:
        try:
            raise driver_exc
        except Exception as exc:
            raise OperationalError(*exc.args) from exc
    except OperationalError as wrapped:
        return wrapped


@pytest.mark.parametrize("message", ["database is locked", "unable to open database file", "disk I/O error"])
def test_sqlite_that_cannot_serve_is_a_503(message):
    response = api_exception_handler(_driver_error(sqlite3.OperationalError(message)), {})
    assert response.status_code == 503


@pytest.mark.parametrize("message", ["no such function: jsonb_array_length", "no such column: x",
                                     'near "SELEKT": syntax error'])
def test_a_query_sqlite_refuses_is_a_bug_left_to_django_as_a_500(message):
    """Not an outage: 'unavailable for a moment' would be a lie to the user and a warning the operator ignores."""
    assert api_exception_handler(_driver_error(sqlite3.OperationalError(message)), {}) is None
