"""Every write to a Job: enqueue, run, progress, retry, finish, cancel."""

import logging
import time

from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError as KombuOperationalError

from dataplatform.accounts.models import Project
from dataplatform.broker import BrokerUnavailable, unreachable_message
from dataplatform.inference import BackendUnavailable

from .models import TERMINAL_STATES, Job, JobState
from .registry import JobCancelled, get_kind

logger = logging.getLogger(__name__)


class InvalidJobParams(ValueError):
    def __init__(self, errors: dict):
        super().__init__(f"Invalid job parameters: {errors}")
        self.errors = errors


def validate_params(*, kind: str, params: dict) -> dict:
    serializer = get_kind(kind).params_serializer(data=params)
    if not serializer.is_valid():
        raise InvalidJobParams(serializer.errors)
    return dict(serializer.validated_data)


def enqueue_job(*, project: Project, kind: str, params: dict, user, publish: bool = True) -> Job:
    """Create a queued job and send it to a worker once the transaction commits.

    If the broker cannot be reached the job is marked failed and BrokerUnavailable
    is raised: nothing ever runs inline in the web process. Only a command-line
    caller that runs the job itself (execute_job) passes publish=False.
    """
    clean_params = validate_params(kind=kind, params=params)
    job = Job.objects.create(project=project, kind=kind, params=clean_params, created_by=user)
    if publish:
        transaction.on_commit(lambda: publish_job(job_id=job.pk))
    return job


def publish_job(*, job_id: int) -> None:
    from .tasks import run_job

    try:
        run_job.apply_async(args=[job_id])
    except (KombuOperationalError, OSError) as exc:
        message = unreachable_message(exc)
        fail_job(job_id=job_id, error=message)
        raise BrokerUnavailable(message) from exc


class ProgressReporter:
    """Writes progress to the job row (at most a few times a second) and notices cancel requests."""

    def __init__(self, job: Job, min_interval: float = 0.25, listener=None):
        self.job = job
        self.min_interval = min_interval
        self._last_write = 0.0
        # listener(done, total, message) hears every report, unthrottled (e.g. a terminal progress bar).
        self.listener = listener

    def set_total(self, total: int) -> None:
        self.job.progress_total = total
        Job.objects.filter(pk=self.job.pk).update(progress_total=total, updated_at=timezone.now())

    def report(self, done: int, *, message: str | None = None, force: bool = False) -> None:
        self.job.progress_done = done
        if self.listener:
            self.listener(done, self.job.progress_total, message)
        now = time.monotonic()
        if not force and now - self._last_write < self.min_interval:
            return
        self._last_write = now
        fields = {"progress_done": done, "updated_at": timezone.now()}
        if message is not None:
            fields["status_message"] = message[:500]
        # One query: the row is updated only while no cancel was asked for, so "0 rows" means cancelled.
        if not Job.objects.filter(pk=self.job.pk, cancel_requested=False).update(**fields):
            raise JobCancelled()


def start_job(*, job_id: int) -> Job | None:
    """Move a job to running and count the attempt. None if it is already finished (a redelivery)."""
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        if job is None:  # deleted while queued (e.g. its export was deleted): nothing to do
            logger.warning("Job %s no longer exists; dropping its task.", job_id)
            return None
        if job.state in TERMINAL_STATES:
            return None
        if job.cancel_requested:
            _finish(job, JobState.CANCELLED, status_message="Cancelled before it started.")
            return None
        job.state = JobState.RUNNING
        job.attempts += 1
        job.started_at = job.started_at or timezone.now()
        # A rerun replaces what an earlier attempt wrote; it never adds to it.
        job.progress_done = 0
        job.result = None
        job.status_message = f"Running (attempt {job.attempts})."
        job.save()
    return job


def execute_job(*, job_id: int, listener=None) -> None:
    """Run a job's kind. BackendUnavailable propagates so the task can retry it."""
    job = start_job(job_id=job_id)
    if job is None:
        return
    progress = ProgressReporter(job, listener=listener)
    try:
        result = get_kind(job.kind).run(job, progress)
    except JobCancelled:
        _finish_by_id(job_id, JobState.CANCELLED, status_message="Cancelled by a user.")
    except BackendUnavailable:
        raise
    except Exception as exc:  # a bug or bad input: fail clearly, do not retry
        logger.exception("Job %s (%s) failed", job_id, job.kind)
        fail_job(job_id=job_id, error=f"{type(exc).__name__}: {exc}")
    else:
        _finish_by_id(job_id, JobState.SUCCEEDED, result=result, progress_done=job.progress_total or job.progress_done,
                      status_message="Done.")


def mark_retrying(*, job_id: int, error: str, retry_in: float, attempt: int, max_attempts: int) -> None:
    Job.objects.filter(pk=job_id).exclude(state__in=TERMINAL_STATES).update(
        state=JobState.QUEUED,
        status_message=f"Model backend unavailable (attempt {attempt} of {max_attempts}); retrying in {retry_in:.0f} s.",
        error=error,
        updated_at=timezone.now(),
    )


def fail_job(*, job_id: int, error: str) -> None:
    _finish_by_id(job_id, JobState.FAILED, error=error, status_message="Failed.")


def cancel_job(*, job: Job) -> Job:
    """Cancel a queued job at once; ask a running one to stop at its next progress report."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.state == JobState.QUEUED:
            job.cancel_requested = True
            _finish(job, JobState.CANCELLED, status_message="Cancelled before it started.")
        elif job.state == JobState.RUNNING:
            job.cancel_requested = True
            job.status_message = "Cancelling…"
            job.save(update_fields=["cancel_requested", "status_message", "updated_at"])
    return job


def retry_job(*, job: Job) -> Job:
    """Queue a failed or cancelled job again. Its kind replaces whatever the earlier attempt wrote."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.state not in (JobState.FAILED, JobState.CANCELLED):
            raise ValueError(f"Only a failed or cancelled job can be retried; job {job.pk} is {job.state}.")
        job.state = JobState.QUEUED
        job.cancel_requested = False
        job.error = ""
        job.status_message = "Queued again."
        job.finished_at = None
        job.save()
        transaction.on_commit(lambda: publish_job(job_id=job.pk))
    return job


def _finish_by_id(job_id: int, state: JobState, **fields) -> None:
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        if job.state not in TERMINAL_STATES:
            _finish(job, state, **fields)


def _finish(job: Job, state: JobState, **fields) -> None:
    job.state = state
    job.finished_at = timezone.now()
    for name, value in fields.items():
        setattr(job, name, value)
    job.save()
