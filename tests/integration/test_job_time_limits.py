"""Job code that hangs while its worker stays alive (the heartbeat thread keeps beating), with the real
parts: a live prefork Celery worker, Redis, PostgreSQL, tiny time limits.

- Soft limit: the job fails with a message, is not retried, and the same pool process runs the next job.
- Hard limit (code that ignores the soft one, like a stuck C call): the pool process is killed, the
  heartbeat stops, and the reaper queues the job again, then fails it after JOB_MAX_STALE_RUNS runs.
"""

import functools

import pytest

from dataplatform.jobs import services
from dataplatform.jobs.models import JobState
from tests.jobs import kinds  # noqa: F401  (registers test.block and test.count here; the worker imports them too)

from ..worker import QUICK_REAPER, wait_for_terminal

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def start_worker_with_test_kinds(start_worker):
    return functools.partial(start_worker, include=("tests.jobs.kinds",))


def enqueue(project, user, kind: str, **params):
    return services.enqueue_job(project=project, kind=kind, params=params, user=user)


def test_a_job_stopped_by_the_soft_limit_fails_and_the_worker_runs_the_next_one(project, members,
                                                                                start_worker_with_test_kinds):
    worker = start_worker_with_test_kinds(JOB_SOFT_TIME_LIMIT_SECONDS="1", JOB_HARD_TIME_LIMIT_SECONDS="60",
                                          JOB_HEARTBEAT_SECONDS="0.2")
    stuck = enqueue(project, members["curator"], "test.block", seconds=120)
    stuck, seen = wait_for_terminal(stuck.pk, worker, timeout=60)
    assert stuck.state == JobState.FAILED, f"{stuck.error}\n{worker.log()}"
    assert stuck.error.startswith("Stopped after running 1 s, the time limit of one run (JOB_SOFT_TIME_LIMIT_SECONDS).")
    assert stuck.status_message == "Failed: time limit reached."
    assert stuck.attempts == 1  # not retried
    assert "Blocking." in [message for _, _, _, message in seen]  # it ran, and hung, before the limit

    following = enqueue(project, members["curator"], "test.count", to=3)
    following, _ = wait_for_terminal(following.pk, worker, timeout=60)
    assert following.state == JobState.SUCCEEDED, f"{following.error}\n{worker.log()}"
    assert following.worker == stuck.worker  # the same pool process: the soft limit did not kill it
    assert "Hard time limit" not in worker.log_path.read_text()


def test_a_job_that_ignores_the_soft_limit_is_killed_requeued_then_failed_by_the_reaper(
        project, members, start_worker_with_test_kinds):
    worker = start_worker_with_test_kinds(**QUICK_REAPER, JOB_MAX_STALE_RUNS="2",
                                          JOB_SOFT_TIME_LIMIT_SECONDS="1", JOB_HARD_TIME_LIMIT_SECONDS="2")
    stuck = enqueue(project, members["curator"], "test.block", seconds=120, ignore_soft_limit=True)
    stuck, _ = wait_for_terminal(stuck.pk, worker, timeout=120)
    assert stuck.state == JobState.FAILED, f"{stuck.error}\n{worker.log()}"
    assert stuck.attempts == 2
    assert "stopped answering" in stuck.error and "lost 2 times" in stuck.error
    # The requeue itself, from the worker's log: the row is `queued` for only as long as the worker takes
    # to pick it up again, which can be shorter than the 50 ms between polls.
    assert f"Reaper: requeued [{stuck.pk}]" in worker.log_path.read_text(), worker.log()
    assert worker.log_path.read_text().count("Hard time limit (2.0s) exceeded") == 2

    following = enqueue(project, members["curator"], "test.count", to=3)
    following, _ = wait_for_terminal(following.pk, worker, timeout=60)
    assert following.state == JobState.SUCCEEDED, f"{following.error}\n{worker.log()}"
    assert following.worker != stuck.worker  # the killed pool process was replaced
