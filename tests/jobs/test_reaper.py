"""A job whose worker dies is noticed by its silent heartbeat, queued again or failed; never left running."""

import threading
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from dataplatform.jobs import services
from dataplatform.jobs.models import Job, JobState

from . import kinds  # noqa: F401  (registers test.count)

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(project, members, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        return services.enqueue_job(project=project, kind="test.count", params={"to": 3}, user=members["curator"])


def running_on(job: Job, worker: str, *, silent_for: float, attempts: int = 1) -> Job:
    """Put the row in the state a worker leaves it in, last heard of `silent_for` seconds ago."""
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, worker=worker, attempts=attempts,
                                         heartbeat_at=timezone.now() - timedelta(seconds=silent_for))
    job.refresh_from_db()
    return job


def test_a_silent_running_job_is_queued_again_and_sent(job, settings, django_capture_on_commit_callbacks):
    settings.JOB_STALE_AFTER_SECONDS = 60
    running_on(job, "box:4242", silent_for=61)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        outcome = services.reap_stale_jobs()
    assert outcome == {"requeued": [job.pk], "failed": [], "resent": []}
    assert len(callbacks) == 1  # published once the requeue commits
    job.refresh_from_db()
    assert job.state == JobState.QUEUED and job.worker == ""
    assert "box:4242" in job.status_message and "queued again" in job.status_message


def test_a_job_with_a_recent_heartbeat_is_left_alone(job, settings):
    settings.JOB_STALE_AFTER_SECONDS = 60
    running_on(job, "box:1", silent_for=30)
    assert services.reap_stale_jobs() == {"requeued": [], "failed": [], "resent": []}
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.worker == "box:1"


def test_a_job_lost_too_often_fails_with_a_message(job, settings):
    settings.JOB_STALE_AFTER_SECONDS, settings.JOB_MAX_STALE_RUNS = 60, 3
    running_on(job, "box:7", silent_for=120, attempts=3)
    assert services.reap_stale_jobs()["failed"] == [job.pk]
    job.refresh_from_db()
    assert job.state == JobState.FAILED and job.finished_at
    assert "box:7" in job.error and "lost 3 times" in job.error


def test_a_long_queued_job_is_sent_again_at_most_once_per_interval(job, settings,
                                                                    django_capture_on_commit_callbacks):
    settings.JOB_REPUBLISH_QUEUED_AFTER_SECONDS = 300
    Job.objects.filter(pk=job.pk).update(updated_at=timezone.now() - timedelta(seconds=301))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert services.reap_stale_jobs()["resent"] == [job.pk]
    assert len(callbacks) == 1
    assert services.reap_stale_jobs()["resent"] == []  # updated_at moved on: not again until 300 s pass
    job.refresh_from_db()
    assert job.state == JobState.QUEUED


def test_a_duplicate_message_for_a_live_running_job_is_dropped(job, settings):
    settings.JOB_STALE_AFTER_SECONDS = 60
    running_on(job, "box:1", silent_for=5)
    assert services.start_job(job_id=job.pk) is None
    job.refresh_from_db()
    assert (job.state, job.worker, job.attempts) == (JobState.RUNNING, "box:1", 1)


def test_a_message_for_a_silent_running_job_takes_it_over(job, settings):
    settings.JOB_STALE_AFTER_SECONDS = 60
    running_on(job, "box:1", silent_for=90)
    started = services.start_job(job_id=job.pk)
    assert started is not None and started.attempts == 2
    assert started.worker == services.worker_id() and started.heartbeat_at > timezone.now() - timedelta(seconds=5)


def test_a_worker_that_lost_its_job_stops_without_touching_the_rerun(job, monkeypatch):
    """The first worker comes back to life after its job was given to another: its progress write
    finds the row no longer names it, it stops, and neither state nor result are overwritten."""
    def hijacked_run(job_row, progress):
        Job.objects.filter(pk=job_row.pk).update(worker="other:2")  # the reaper and a rerun happened meanwhile
        progress.report(1, force=True)
        raise AssertionError("report() must stop a worker that no longer owns the job")

    monkeypatch.setattr(services, "get_kind", lambda name: SimpleNamespace(run=hijacked_run))
    services.execute_job(job_id=job.pk)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.worker == "other:2" and job.error == ""


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_stamps_the_row_while_the_job_runs(project, members, settings, monkeypatch):
    settings.JOB_HEARTBEAT_SECONDS = 0.05
    job = Job.objects.create(project=project, kind="test.count", params={"to": 1}, created_by=members["curator"])
    job = services.start_job(job_id=job.pk)
    first = job.heartbeat_at
    beats = threading.Event()

    def watch():
        for _ in range(100):
            if Job.objects.get(pk=job.pk).heartbeat_at > first:
                beats.set()
                return
            threading.Event().wait(0.02)

    with services.Heartbeat(job):
        watcher = threading.Thread(target=watch)
        watcher.start()
        watcher.join()
    assert beats.is_set(), "no heartbeat was written while the job ran"


def test_the_reap_command_reports_what_it_did(job, settings):
    from io import StringIO

    from django.core.management import call_command

    settings.JOB_STALE_AFTER_SECONDS = 60
    running_on(job, "box:9", silent_for=100)
    out = StringIO()
    call_command("reap_jobs", stdout=out)
    assert out.getvalue().strip() == "requeued 1, failed 0, re-sent 0"
    job.refresh_from_db()
    assert job.state == JobState.QUEUED


def test_a_running_job_that_never_had_a_heartbeat_is_reaped_by_its_last_update(job, settings):
    """Rows that were running before heartbeats existed must not stay "running" forever."""
    settings.JOB_STALE_AFTER_SECONDS = 60
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, worker="old:1", heartbeat_at=None,
                                         updated_at=timezone.now() - timedelta(seconds=61))
    assert services.reap_stale_jobs()["requeued"] == [job.pk]
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, heartbeat_at=None, updated_at=timezone.now())
    assert services.reap_stale_jobs()["requeued"] == []  # recently updated: alive as far as anyone knows
