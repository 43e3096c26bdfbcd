import pytest

from dataplatform.jobs.models import Job, JobState
from tests.conftest import api_client_for

pytestmark = pytest.mark.django_db


def make_jobs(project, user, count, **fields):
    return [Job.objects.create(project=project, kind="demo.sample_continuations", params={}, created_by=user, **fields)
            for _ in range(count)]


def test_create_returns_202_with_the_queued_job(project, members, django_capture_on_commit_callbacks):
    client = api_client_for(members["curator"])
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post("/api/v1/projects/alpha/jobs/",
                               {"kind": "demo.sample_continuations", "params": {"prompt": "hi", "n": 2}}, format="json")
    assert response.status_code == 202
    body = response.json()
    assert body["state"] == "queued" and body["params"]["n"] == 2 and body["created_by"] == "curator"
    assert len(callbacks) == 1


@pytest.mark.parametrize("payload, field", [
    ({"kind": "nope", "params": {}}, "kind"),
    ({"kind": "demo.sample_continuations", "params": {"n": 99}}, "params"),
])
def test_create_rejects_bad_input_with_field_errors(project, members, payload, field):
    response = api_client_for(members["curator"]).post("/api/v1/projects/alpha/jobs/", payload, format="json")
    assert response.status_code == 400 and field in response.json()
    assert not Job.objects.exists()


def test_list_is_scoped_to_the_project_and_filterable(project, other_project, members):
    make_jobs(project, members["curator"], 3)
    make_jobs(project, members["curator"], 2, state=JobState.FAILED)
    make_jobs(other_project, None, 4)
    client = api_client_for(members["curator"])
    assert len(client.get("/api/v1/projects/alpha/jobs/").json()["results"]) == 5
    failed = client.get("/api/v1/projects/alpha/jobs/?state=failed").json()["results"]
    assert len(failed) == 2 and {j["project"] for j in failed} == {"alpha"}
    assert client.get("/api/v1/projects/beta/jobs/").status_code == 404


def test_list_query_count_does_not_grow_with_rows(project, members, django_assert_max_num_queries):
    client = api_client_for(members["admin"])
    make_jobs(project, members["curator"], 2)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as few:
        client.get("/api/v1/projects/alpha/jobs/")
    make_jobs(project, members["curator"], 30)
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert len(client.get("/api/v1/projects/alpha/jobs/").json()["results"]) == 32


def test_list_is_cursor_paginated(project, members):
    make_jobs(project, members["curator"], 7)
    client = api_client_for(members["admin"])
    first = client.get("/api/v1/projects/alpha/jobs/?page_size=5").json()
    second = client.get(first["next"]).json()
    ids = [j["id"] for j in first["results"]] + [j["id"] for j in second["results"]]
    assert len(ids) == 7 == len(set(ids)) and second["next"] is None
    assert ids == sorted(ids, reverse=True)


def test_cancel_a_queued_job(project, members):
    job = make_jobs(project, members["curator"], 1)[0]
    response = api_client_for(members["admin"]).post(f"/api/v1/jobs/{job.pk}/cancel/")
    assert response.status_code == 200 and response.json()["state"] == "cancelled"


def test_job_in_another_project_is_404(project, other_project, members):
    foreign = make_jobs(other_project, None, 1)[0]
    assert api_client_for(members["admin"]).get(f"/api/v1/jobs/{foreign.pk}/").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_an_unreachable_broker_is_a_503_naming_it_and_the_job_is_recorded_failed(project, members, monkeypatch):
    """Views do not catch BrokerUnavailable: the shared exception handler answers 503 for all of them.
    (The real unreachable broker, in a separate process: tests/system/test_checks.py.)"""
    from dataplatform.jobs import tasks

    def refused(*args, **kwargs):
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(tasks.run_job, "apply_async", refused)
    response = api_client_for(members["curator"]).post(
        "/api/v1/projects/alpha/jobs/", {"kind": "demo.sample_continuations", "params": {"prompt": "hi"}},
        format="json")
    assert response.status_code == 503, response.content
    assert "broker" in response.json()["detail"].lower()
    assert Job.objects.get().state == JobState.FAILED


def test_a_full_job_queue_is_a_429_with_retry_after(project, members, settings):
    settings.JOB_MAX_QUEUED_PER_PROJECT = 2
    make_jobs(project, members["curator"], 2)
    response = api_client_for(members["curator"]).post(
        "/api/v1/projects/alpha/jobs/", {"kind": "demo.sample_continuations", "params": {"prompt": "hi"}},
        format="json")
    assert response.status_code == 429, response.content
    assert response["Retry-After"] == "30"
    detail = response.json()["detail"]
    assert detail.startswith("Alpha already has 2 jobs waiting for a worker") and "JOB_MAX_QUEUED_PER_PROJECT" in detail
    assert Job.objects.count() == 2
