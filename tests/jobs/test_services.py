import threading
import time
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.db import connection
from django.utils import timezone

from dataplatform.inference import BackendUnavailable
from dataplatform.jobs import services
from dataplatform.jobs.models import Job, JobState
from dataplatform.jobs.registry import get_kind

from . import kinds  # noqa: F401  (registers test.count)

pytestmark = pytest.mark.django_db


def enqueue(project, user, **params):
    return services.enqueue_job(project=project, kind="test.count", params=params, user=user)


def test_enqueue_publishes_only_after_commit(project, members, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        job = enqueue(project, members["curator"], to=5)
    assert job.state == JobState.QUEUED
    assert job.params == {"to": 5, "fail_with": ""}  # normalised by the kind's serializer
    assert len(callbacks) == 1


def test_invalid_params_are_refused_before_any_row_is_written(project, members):
    with pytest.raises(services.InvalidJobParams) as info:
        enqueue(project, members["curator"], to=0)
    assert "to" in info.value.errors
    assert not Job.objects.exists()


def test_unknown_kind_is_a_clear_error(project, members):
    with pytest.raises(LookupError, match="Unknown job kind 'nope'"):
        services.enqueue_job(project=project, kind="nope", params={}, user=members["curator"])


def test_execute_runs_to_succeeded_with_progress(project, members, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        job = enqueue(project, members["curator"], to=7)
    services.execute_job(job_id=job.pk)
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED
    assert (job.progress_done, job.progress_total, job.percent) == (7, 7, 100)
    assert job.result == {"counted": 7}
    assert job.attempts == 1 and job.started_at and job.finished_at


def test_a_bug_in_the_job_fails_it_with_the_message(project, members, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        job = enqueue(project, members["curator"], to=7, fail_with="error")
    services.execute_job(job_id=job.pk)
    job.refresh_from_db()
    assert job.state == JobState.FAILED
    assert job.error == "ValueError: the count broke at 3"


def test_backend_outage_propagates_for_retry(project, members, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        job = enqueue(project, members["curator"], to=2, fail_with="backend")
    with pytest.raises(BackendUnavailable):
        services.execute_job(job_id=job.pk)
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING  # the task decides: retry or fail


def test_rerun_of_a_finished_job_changes_nothing(project, members, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        job = enqueue(project, members["curator"], to=3)
    services.execute_job(job_id=job.pk)
    finished = Job.objects.get(pk=job.pk)
    services.execute_job(job_id=job.pk)  # a redelivered message
    again = Job.objects.get(pk=job.pk)
    assert (again.attempts, again.finished_at, again.result) == (finished.attempts, finished.finished_at, finished.result)


def test_rerun_of_an_interrupted_job_replaces_its_progress(project, members, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        job = enqueue(project, members["curator"], to=4)
    # A worker died here: last heard of an hour ago (a live one's duplicate message is dropped: test_reaper.py).
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, progress_done=3, attempts=1, worker="gone:1",
                                         heartbeat_at=timezone.now() - timedelta(hours=1))
    services.execute_job(job_id=job.pk)
    job.refresh_from_db()
    assert (job.state, job.progress_done, job.attempts) == (JobState.SUCCEEDED, 4, 2)


def test_cancel_queued_job_is_immediate(project, members, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        job = enqueue(project, members["curator"], to=3)
    services.cancel_job(job=job)
    services.execute_job(job_id=job.pk)  # the message still arrives later
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED and job.result is None


def test_cancel_running_job_stops_it_at_the_next_report(project, members, django_capture_on_commit_callbacks,
                                                        monkeypatch):
    with django_capture_on_commit_callbacks(execute=False):
        job = enqueue(project, members["curator"], to=3)
    def run_and_get_cancelled(job_row, progress):
        services.cancel_job(job=job_row)  # a user clicks "Cancel" while it runs
        assert Job.objects.get(pk=job_row.pk).cancel_requested
        progress.report(1, force=True)
        raise AssertionError("the report after a cancel request must stop the job")

    monkeypatch.setattr(services, "get_kind", lambda name: SimpleNamespace(run=run_and_get_cancelled))
    services.execute_job(job_id=job.pk)
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED and job.status_message == "Cancelled by a user."


def test_mark_retrying_and_fail(project, members, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        job = enqueue(project, members["curator"], to=3)
    services.mark_retrying(job_id=job.pk, error="down", retry_in=4, attempt=1, max_attempts=3)
    job.refresh_from_db()
    assert job.state == JobState.QUEUED and "attempt 1 of 3" in job.status_message
    services.fail_job(job_id=job.pk, error="gave up")
    services.mark_retrying(job_id=job.pk, error="late", retry_in=4, attempt=2, max_attempts=3)
    job.refresh_from_db()
    assert job.state == JobState.FAILED and job.error == "gave up"  # terminal states are final


def test_demo_kind_is_registered():
    assert get_kind("demo.sample_continuations").params_serializer(data={"prompt": "hi"}).is_valid()


def test_a_task_for_a_deleted_job_does_nothing(project, members, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        job = enqueue(project, members["curator"], to=3)
    job_id = job.pk
    job.delete()
    services.execute_job(job_id=job_id)  # the message was already in the queue
    assert not Job.objects.filter(pk=job_id).exists()


# --- the cap on queued jobs per project (JOB_MAX_QUEUED_PER_PROJECT) ---------------------------------

def test_a_full_queue_refuses_the_next_job_and_writes_nothing(project, members, settings):
    settings.JOB_MAX_QUEUED_PER_PROJECT = 2
    enqueue(project, members["curator"], to=1)
    enqueue(project, members["curator"], to=1)
    with pytest.raises(services.JobQueueFull, match="Alpha already has 2 jobs waiting for a worker") as info:
        enqueue(project, members["curator"], to=1)
    assert "JOB_MAX_QUEUED_PER_PROJECT" in str(info.value) and info.value.retry_after > 0
    assert Job.objects.count() == 2


def test_only_the_projects_own_queued_jobs_count(project, other_project, members, settings):
    settings.JOB_MAX_QUEUED_PER_PROJECT = 2
    for state in (JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED, JobState.QUEUED):
        Job.objects.create(project=project, kind="test.count", state=state)
    for _ in range(2):
        Job.objects.create(project=other_project, kind="test.count")  # beta's queue is full, alpha's is not
    enqueue(project, members["curator"], to=1)
    with pytest.raises(services.JobQueueFull):
        enqueue(project, members["curator"], to=1)


def test_zero_switches_the_cap_off(project, members, settings):
    settings.JOB_MAX_QUEUED_PER_PROJECT = 0
    for _ in range(3):
        Job.objects.create(project=project, kind="test.count")
    assert enqueue(project, members["curator"], to=1).state == JobState.QUEUED


def test_a_job_its_caller_runs_itself_is_not_capped(project, members, settings):
    """publish=False (the `export` command): the job never waits in the workers' queue."""
    settings.JOB_MAX_QUEUED_PER_PROJECT = 1
    Job.objects.create(project=project, kind="test.count")
    job = services.enqueue_job(project=project, kind="test.count", params={"to": 1}, user=None, publish=False)
    assert job.pk


def test_retrying_a_job_is_refused_while_the_queue_is_full(project, members, settings):
    settings.JOB_MAX_QUEUED_PER_PROJECT = 1
    failed = Job.objects.create(project=project, kind="test.count", state=JobState.FAILED)
    Job.objects.create(project=project, kind="test.count")
    with pytest.raises(services.JobQueueFull):
        services.retry_job(job=failed)
    assert Job.objects.get(pk=failed.pk).state == JobState.FAILED


@pytest.mark.integration  # real concurrent transactions: row locks on PostgreSQL, SQLite's one write lock
@pytest.mark.django_db(transaction=True)
def test_a_burst_of_concurrent_requests_never_queues_past_the_cap(project, members, settings, monkeypatch):
    settings.JOB_MAX_QUEUED_PER_PROJECT = cap = 5
    monkeypatch.setattr(services, "publish_job", lambda job_id: None)  # no worker: only the rows matter
    check_room = services._ensure_room_in_queue

    def check_room_then_dawdle(project):
        check_room(project)
        time.sleep(0.05)  # a slow request between its count and its insert: every unlocked count would collide

    monkeypatch.setattr(services, "_ensure_room_in_queue", check_room_then_dawdle)
    callers = 20
    barrier = threading.Barrier(callers)
    accepted, refused, errors = [], [], []

    def request_a_job():
        try:
            barrier.wait()
            accepted.append(enqueue(project, members["curator"], to=1).pk)
        except services.JobQueueFull:
            refused.append(1)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=request_a_job) for _ in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert (len(accepted), len(refused)) == (cap, callers - cap)
    assert Job.objects.filter(project=project, state=JobState.QUEUED).count() == cap
