"""Every write to a Job: enqueue, run, progress, retry, finish, cancel."""

import logging
import os
import socket
import threading
import time
from datetime import timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop
from kombu.exceptions import OperationalError as KombuOperationalError
from psycopg.pq import TransactionStatus

from dataplatform.accounts.models import Project
from dataplatform.broker import BrokerUnavailable, unreachable_message, unreachable_status
from dataplatform.errors import Overloaded, Refused, Transient
from dataplatform.status import Status, WordedError

from .models import TERMINAL_STATES, Job, JobState
from .registry import JobCancelled, get_kind


class JobLost(Exception):
    """This worker no longer owns the job: it was declared dead and the job was queued again."""


def worker_id() -> str:
    """This process's name on the job rows it runs ("host:pid").

    A heartbeat, a progress write or the final state only counts while the row still names this
    worker, so a worker that was declared dead cannot overwrite the rerun. Read per call: prefork
    children are forked after import."""
    return f"{socket.gethostname()}:{os.getpid()}"

logger = logging.getLogger(__name__)


class InvalidJobParams(Refused):
    def __init__(self, errors: dict):
        super().__init__(gettext("Invalid job parameters: %(errors)s") % {"errors": errors})
        self.errors = errors

    def body(self) -> dict:
        return {"params": self.errors}


def validate_params(*, kind: str, params: dict) -> dict:
    serializer = get_kind(kind).params_serializer(data=params)
    if not serializer.is_valid():
        raise InvalidJobParams(serializer.errors)
    return dict(serializer.validated_data)


class JobQueueFull(Overloaded):
    """The project already has JOB_MAX_QUEUED_PER_PROJECT jobs waiting for a worker."""

    # The queue drains as workers start jobs; there is no better estimate of when a place frees up.
    retry_after = 30

    def __init__(self, *, project: Project, limit: int):
        # The cap is a setting well above 1 (tests set it low), so the message has no singular.
        super().__init__(
            gettext("%(project)s already has %(limit)d jobs waiting for a worker, the most a project may queue "
                    "(JOB_MAX_QUEUED_PER_PROJECT). Try again when some have started, or cancel some.")
            % {"project": project.name, "limit": limit})


def enqueue_job(*, project: Project, kind: str, params: dict, user, publish: bool = True) -> Job:
    """Create a queued job and send it to a worker once the transaction commits.

    Every job is created here. JobQueueFull if the project's queue is full (nothing is written).
    If the broker cannot be reached the job is marked failed and BrokerUnavailable
    is raised: nothing ever runs inline in the web process. Only a command-line
    caller that runs the job itself (execute_job) passes publish=False; such a job never waits
    in the workers' queue, so the cap does not apply to it.
    """
    clean_params = validate_params(kind=kind, params=params)
    with transaction.atomic():
        if publish:
            _ensure_room_in_queue(project)
        job = Job.objects.create(project=project, kind=kind, params=clean_params, created_by=user)
        if publish:
            transaction.on_commit(lambda: publish_job(job_id=job.pk))
    return job


def _ensure_room_in_queue(project: Project) -> None:
    """Raise JobQueueFull unless the project has fewer than JOB_MAX_QUEUED_PER_PROJECT queued jobs.

    Call it in the transaction that then queues the job. It locks the project's row until that
    transaction ends, so concurrent requests of one project count one after the other, each seeing
    the jobs the others committed: a burst stops exactly at the cap. FOR NO KEY UPDATE rather than
    FOR UPDATE: inserts of rows that point to the project (their foreign key takes KEY SHARE) neither
    wait for it nor block it. SQLite ignores the lock; its transactions take the write lock at BEGIN.

    Only queued jobs count: the cap bounds the backlog a project can pile up ahead of everyone
    else's work. Running jobs are already bounded by the workers' slots, and counting them would
    let a few long jobs stop a project from queuing anything.
    """
    limit = settings.JOB_MAX_QUEUED_PER_PROJECT
    if not limit:
        return
    Project.objects.select_for_update(no_key=True).only("pk").get(pk=project.pk)  # only for the lock
    if Job.objects.filter(project=project, state=JobState.QUEUED).count() >= limit:
        raise JobQueueFull(project=project, limit=limit)


def publish_job(*, job_id: int) -> None:
    from .tasks import send_run_job

    try:
        send_run_job(job_id)
    except (KombuOperationalError, OSError) as exc:
        message = unreachable_status(exc)
        fail_job(job_id=job_id, error=message)
        raise BrokerUnavailable(message.translated()) from exc  # in the request's language; the row keeps both


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
        if not self._own_row().update(progress_total=total, updated_at=timezone.now()):
            raise JobLost()

    def report(self, done: int, *, message: Status | str | None = None, force: bool = False) -> None:
        """`message`: a Status (shown in each page's language) or, from code not yet translated, an English str."""
        self.job.progress_done = done
        if self.listener:
            self.listener(done, self.job.progress_total, None if message is None else str(message))
        now = time.monotonic()
        if not force and now - self._last_write < self.min_interval:
            return
        self._last_write = now
        fields = {"progress_done": done, "updated_at": timezone.now()}
        if message is not None:
            fields["status_message"] = str(message)[:500]
            fields["status_i18n"] = message.as_json() if isinstance(message, Status) else None
        # One query: the row is updated only while no cancel was asked for and this worker still owns
        # it, so "0 rows" means cancelled (or lost, which the next question tells apart).
        if not self._own_row().filter(cancel_requested=False).update(**fields):
            if not self._own_row().exists():
                raise JobLost()
            raise JobCancelled()

    def _own_row(self):
        return Job.objects.filter(pk=self.job.pk, worker=self.job.worker)


def start_job(*, job_id: int) -> Job | None:
    """Move a job to running and count the attempt.

    None if there is nothing to run: the job is finished, or another live worker runs it (a
    duplicate message: the reaper re-sent it, or the broker redelivered it)."""
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        if job is None:  # deleted while queued (e.g. its export was deleted): nothing to do
            logger.warning("Job %s no longer exists; dropping its task.", job_id)
            return None
        if job.state in TERMINAL_STATES:
            return None
        if job.state == JobState.RUNNING and not _is_stale(job):
            logger.info("Job %s is already running on %s; dropping a duplicate message.", job_id, job.worker)
            return None
        if job.cancel_requested:
            _finish(job, JobState.CANCELLED, status=Status(gettext_noop("Cancelled before it started.")))
            return None
        job.state = JobState.RUNNING
        job.attempts += 1
        job.started_at = job.started_at or timezone.now()
        job.worker, job.heartbeat_at = worker_id(), timezone.now()
        # A rerun replaces what an earlier attempt wrote; it never adds to it.
        job.progress_done = 0
        job.result = None
        job.set_status(Status(gettext_noop("Running (attempt %(attempt)s)."), attempt=job.attempts))
        job.save()
    return job


def execute_job(*, job_id: int, listener=None) -> None:
    """Run a job's kind. A Transient error propagates so the task can retry it."""
    started = time.monotonic()
    job = start_job(job_id=job_id)
    if job is None:
        return
    progress = ProgressReporter(job, listener=listener)
    try:
        with Heartbeat(job):
            result = get_kind(job.kind).run(job, progress)
    except JobLost:
        logger.warning("Job %s was queued again while this worker ran it; stopping this run.", job_id)
    except SoftTimeLimitExceeded:
        # Celery's soft time limit (tasks.run_job): the code ran too long or hangs while the heartbeat
        # still beats. Leaving the `with` stopped the heartbeat; a rerun would most likely hang again,
        # so the job fails (no retry) and a person decides.
        logger.error("Job %s (%s) reached the soft time limit and was stopped.", job_id, job.kind)
        _drop_interrupted_connection()
        _finish_by_id(job_id, JobState.FAILED, worker=job.worker, error=time_limit_message(time.monotonic() - started),
                      status=Status(gettext_noop("Failed: time limit reached.")))
    except JobCancelled:
        _finish_by_id(job_id, JobState.CANCELLED, worker=job.worker, status=Status(gettext_noop("Cancelled by a user.")))
    except Transient:
        raise
    except Exception as exc:  # a bug or bad input: fail clearly, do not retry
        logger.exception("Job %s (%s) failed", job_id, job.kind)
        _finish_by_id(job_id, JobState.FAILED, worker=job.worker, error=_exception_error(exc),
                      status=Status(gettext_noop("Failed.")))
    else:  # error="": a retried job's success clears the outage its earlier attempt recorded
        _finish_by_id(job_id, JobState.SUCCEEDED, worker=job.worker, result=result, error="",
                      progress_done=job.progress_total or job.progress_done, status=Status(gettext_noop("Done.")))


def _drop_interrupted_connection() -> None:
    """SoftTimeLimitExceeded lands wherever the code was, maybe inside a PostgreSQL query (psycopg waits
    in Python, and only cancels on Ctrl-C): cancel that query on the server, so a write of the stopped
    run cannot land later, and go on with a fresh connection."""
    if connection.in_atomic_block:  # only in tests (the test transaction); a worker runs jobs outside one
        return
    raw = connection.connection
    if connection.vendor == "postgresql" and raw is not None and raw.info.transaction_status == TransactionStatus.ACTIVE:
        try:
            raw.cancel_safe(timeout=3)
        except Exception:  # the server is unreachable too: closing is all that is left
            logger.warning("Could not cancel the interrupted query", exc_info=True)
    connection.close()


def _exception_error(exc: Exception) -> Status | str:
    """A failed job's error: the exception's class and text; worded as a message (shown in the page's language)
    when it is a WordedError (a replay runner's refusal, say)."""
    if isinstance(exc, WordedError) and exc.i18n:
        return Status(gettext_noop("%(kind)s: %(message)s"), kind=type(exc).__name__, message=exc.i18n)
    return f"{type(exc).__name__}: {exc}"


def time_limit_message(ran_for: float) -> Status:
    return Status(gettext_noop("Stopped after running %(duration)s, the time limit of one run "
                               "(JOB_SOFT_TIME_LIMIT_SECONDS). What it saved is kept and a retry continues from there "
                               "(an export starts over); if it needs longer, raise the limit."),
                  duration=_duration(ran_for))


def _duration(seconds: float) -> Status:
    """'6 h 0 min', '12 min', '3 s'."""
    seconds = round(seconds)
    if seconds < 60:
        return Status(gettext_noop("%(seconds)s s"), seconds=seconds)
    minutes = seconds // 60
    if minutes < 60:
        return Status(gettext_noop("%(minutes)s min"), minutes=minutes)
    return Status(gettext_noop("%(hours)s h %(minutes)s min"), hours=minutes // 60, minutes=minutes % 60)


class Heartbeat:
    """While a job runs, a thread stamps `heartbeat_at` on its row every JOB_HEARTBEAT_SECONDS.

    A thread rather than the progress reports: one batch of model calls can take minutes without
    a report, and that must not look like a dead worker."""

    def __init__(self, job: Job):
        self.job = job
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"job-{job.pk}-heartbeat", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        try:
            while not self._stop.wait(settings.JOB_HEARTBEAT_SECONDS):
                try:
                    Job.objects.filter(pk=self.job.pk, worker=self.job.worker, state=JobState.RUNNING).update(
                        heartbeat_at=timezone.now())
                except Exception:  # a database hiccup: the next beat tries again; staleness needs many misses
                    logger.warning("Heartbeat of job %s failed", self.job.pk, exc_info=True)
                    close_old_connections()
        finally:
            connection.close()  # this thread's own connection


def _is_stale(job: Job) -> bool:
    last_seen = job.heartbeat_at or job.updated_at
    return timezone.now() - last_seen > timedelta(seconds=settings.JOB_STALE_AFTER_SECONDS)


def reap_stale_jobs() -> dict:
    """Requeue (or fail) running jobs whose worker went silent; re-send long-queued jobs.

    Safe to run from every worker at once: rows are locked with SKIP LOCKED, and a duplicate
    message for a job that is already running is dropped by `start_job`. SQLite (the embedded mode) has
    no row locks and Django drops the FOR UPDATE: there the transaction is IMMEDIATE (settings/database.py),
    so it holds the file's one write lock from its start and reapers run one after the other, each seeing
    what the one before committed."""
    now = timezone.now()
    requeued, failed, resent = [], [], []
    with transaction.atomic():
        silent_since = now - timedelta(seconds=settings.JOB_STALE_AFTER_SECONDS)
        # A row with no heartbeat at all (started before heartbeats existed) counts from its last update.
        stale = (Job.objects.select_for_update(skip_locked=True)
                 .filter(Q(heartbeat_at__lt=silent_since) | Q(heartbeat_at__isnull=True, updated_at__lt=silent_since),
                         state=JobState.RUNNING))
        for job in stale:
            last_seen = timezone.localtime(job.heartbeat_at or job.updated_at).strftime("%Y-%m-%d %H:%M:%S %Z")
            if job.attempts >= settings.JOB_MAX_STALE_RUNS:
                _finish(job, JobState.FAILED, worker="", status=Status(gettext_noop("Failed: its worker died.")),
                        error=Status(gettext_noop(
                            "The worker running it (%(worker)s) stopped answering (last heartbeat %(last_seen)s). It "
                            "was lost %(attempts)s times, so it is not run again: a crashing input, too little memory "
                            "or code stuck past JOB_HARD_TIME_LIMIT_SECONDS is likely. Retry it once that is fixed."),
                            worker=job.worker, last_seen=last_seen, attempts=job.attempts))
                failed.append(job.pk)
                continue
            job.set_status(Status(gettext_noop("The worker running it (%(worker)s) stopped answering (last heartbeat "
                                               "%(last_seen)s); queued again. It resumes where it stopped."),
                                  worker=job.worker, last_seen=last_seen))
            job.state, job.worker = JobState.QUEUED, ""
            job.save(update_fields=["state", "worker", "status_message", "status_i18n", "updated_at"])
            requeued.append(job.pk)
        resend_before = now - timedelta(seconds=settings.JOB_REPUBLISH_QUEUED_AFTER_SECONDS)
        waiting = (Job.objects.select_for_update(skip_locked=True)
                   .filter(state=JobState.QUEUED, updated_at__lt=resend_before).exclude(pk__in=requeued))
        for job in waiting:
            job.save(update_fields=["updated_at"])  # re-sent at most once per interval
            resent.append(job.pk)
        for job_id in requeued + resent:
            transaction.on_commit(lambda job_id=job_id: _resend(job_id))
    if requeued or failed or resent:
        logger.warning("Reaper: requeued %s, failed %s, re-sent %s", requeued, failed, resent)
    return {"requeued": requeued, "failed": failed, "resent": resent}


BACKEND_RETRYING = gettext_noop("Model backend unavailable (attempt %(attempt)s of %(max_attempts)s); retrying in "
                                "%(seconds)s s.")


def mark_retrying(*, job_id: int, error: str, retry_in: float, attempt: int, max_attempts: int,
                  message: str = BACKEND_RETRYING) -> None:
    """Queue the job again for its retry; `message` (a msgid with the same placeholders) names what is down: a
    Transient's `retrying_message` when it has one (the export storage's), else the model backend."""
    status = Status(message, attempt=attempt, max_attempts=max_attempts, seconds=round(retry_in))
    Job.objects.filter(pk=job_id).exclude(state__in=TERMINAL_STATES).update(
        state=JobState.QUEUED,
        status_message=status.english(),
        status_i18n=status.as_json(),
        error=error,
        error_i18n=None,
        updated_at=timezone.now(),
    )


def _resend(job_id: int) -> None:
    """Publish a job the reaper requeued. Unlike `publish_job`, a broker outage leaves it queued:
    the next reap sends it again, so an outage never turns waiting work into failed work."""
    from .tasks import send_run_job

    try:
        send_run_job(job_id)
    except (KombuOperationalError, OSError) as exc:
        logger.warning("Could not re-send job %s (%s); the next reap tries again.", job_id, unreachable_message(exc))


def fail_job(*, job_id: int, error: Status | str) -> None:
    _finish_by_id(job_id, JobState.FAILED, error=error, status=Status(gettext_noop("Failed.")))


def cancel_job(*, job: Job) -> Job:
    """Cancel a queued job at once; ask a running one to stop at its next progress report."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.state == JobState.QUEUED:
            job.cancel_requested = True
            _finish(job, JobState.CANCELLED, status=Status(gettext_noop("Cancelled before it started.")))
        elif job.state == JobState.RUNNING:
            job.cancel_requested = True
            job.set_status(Status(gettext_noop("Cancelling…")))
            job.save(update_fields=["cancel_requested", "status_message", "status_i18n", "updated_at"])
    return job


def retry_job(*, job: Job) -> Job:
    """Queue a failed or cancelled job again (JobQueueFull if the project's queue is full). Its kind
    replaces whatever the earlier attempt wrote."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.state not in (JobState.FAILED, JobState.CANCELLED):
            raise Refused(gettext("Only a failed or cancelled job can be retried; job %(id)d is %(state)s.")
                          % {"id": job.pk, "state": job.get_state_display().lower()}, field="state")
        _ensure_room_in_queue(job.project)
        job.state = JobState.QUEUED
        job.cancel_requested = False
        job.set_error("")
        job.set_status(Status(gettext_noop("Queued again.")))
        job.finished_at = None
        job.save()
        transaction.on_commit(lambda: publish_job(job_id=job.pk))
    return job


def _finish_by_id(job_id: int, state: JobState, *, worker: str | None = None, **fields) -> None:
    """Finish a job unless it already is. With `worker`, only while that worker still owns it."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        if job.state in TERMINAL_STATES:
            return
        if worker is not None and job.worker != worker:
            logger.warning("Job %s now belongs to %r; %s does not finish it.", job_id, job.worker, worker)
            return
        _finish(job, state, **fields)


def _finish(job: Job, state: JobState, *, status: Status | None = None, **fields) -> None:
    job.state = state
    job.finished_at = timezone.now()
    if status is not None:
        job.set_status(status)
    if "error" in fields:
        job.set_error(fields.pop("error"))
    for name, value in fields.items():
        setattr(job, name, value)
    job.save()
