"""A job whose code hangs while its heartbeat still beats is stopped by Celery's soft time limit and
fails with a message; it is not retried. (Through a live worker: tests/integration/test_job_time_limits.py.)"""

import os
import re
import signal
import threading
from contextlib import contextmanager

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings as django_settings

from dataplatform.jobs import services, tasks
from dataplatform.jobs.models import Job, JobState

from . import kinds  # noqa: F401  (registers test.block)

# Outside a test transaction, as in a worker: the heartbeat thread sees the row, and execute_job drops
# its connection after the limit.
in_a_worker_like_database = pytest.mark.django_db(transaction=True)


@contextmanager
def soft_time_limit(seconds: float):
    """What the prefork pool does at the soft limit: SIGUSR1 to the process running the task, whose
    handler raises SoftTimeLimitExceeded in the main thread, wherever the code is."""
    def raise_soft_limit(signum, frame):
        raise SoftTimeLimitExceeded()

    previous = signal.signal(signal.SIGUSR1, raise_soft_limit)
    timer = threading.Timer(seconds, os.kill, args=(os.getpid(), signal.SIGUSR1))
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)


def blocking_job(project, user, **params) -> Job:
    return Job.objects.create(project=project, kind="test.block", created_by=user,
                              params={"seconds": 30, "ignore_soft_limit": False, "in_query": False} | params)


def heartbeat_threads(job: Job) -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == f"job-{job.pk}-heartbeat"]


@in_a_worker_like_database
@pytest.mark.parametrize("in_query", [
    pytest.param(False, id="in-python"),
    # SQLite has no sleep function, and a signal's handler runs only once its query has returned.
    pytest.param(True, id="in-a-query", marks=pytest.mark.postgres_only("pg_sleep, a query a signal interrupts")),
])
def test_the_soft_limit_fails_the_job_with_a_message_and_stops_its_heartbeat(project, members, settings, in_query):
    settings.JOB_HEARTBEAT_SECONDS = 0.05
    job = blocking_job(project, members["curator"], in_query=in_query)
    with soft_time_limit(0.5):
        tasks.run_job.apply(args=[job.pk])  # the task's own code path, run here
    job.refresh_from_db()
    assert job.state == JobState.FAILED and job.finished_at
    assert re.match(r"Stopped after running \d s, the time limit of one run \(JOB_SOFT_TIME_LIMIT_SECONDS\)\.", job.error)
    assert "a retry continues from there" in job.error
    assert job.status_message == "Failed: time limit reached."
    assert job.attempts == 1  # failed for good, not retried like a backend outage
    assert not heartbeat_threads(job)


@in_a_worker_like_database
def test_a_job_that_finishes_within_the_limit_is_untouched(project, members):
    job = blocking_job(project, members["curator"], seconds=0.1)
    with soft_time_limit(5):
        services.execute_job(job_id=job.pk)
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED and job.error == ""


def test_only_the_job_task_has_time_limits():
    assert tasks.run_job.soft_time_limit == django_settings.JOB_SOFT_TIME_LIMIT_SECONDS == 6 * 3600
    assert tasks.run_job.time_limit == django_settings.JOB_HARD_TIME_LIMIT_SECONDS == 6 * 3600 + 600
    assert tasks.reap_jobs.soft_time_limit is None and tasks.reap_jobs.time_limit is None


@pytest.mark.parametrize(("seconds", "text"), [(0.4, "0 s"), (59.6, "1 min"), (754, "12 min"),
                                               (6 * 3600, "6 h 0 min"), (7 * 3600 + 125, "7 h 2 min")])
def test_the_message_says_how_long_the_job_ran(seconds, text):
    assert services.time_limit_message(seconds).english().startswith(f"Stopped after running {text}, ")
