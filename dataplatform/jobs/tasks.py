"""Celery tasks for jobs. They only call services; retries use Celery's own machinery."""

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.utils.translation import gettext_noop

from dataplatform.errors import Transient
from dataplatform.status import Status, WordedError

from . import services


# The time limits catch code that hangs while its heartbeat thread still beats (a prefork pool only,
# see settings.JOB_SOFT_TIME_LIMIT_SECONDS): the soft one raises SoftTimeLimitExceeded in the job and
# execute_job fails it; the hard one kills the pool process and the reaper takes over.
@shared_task(bind=True, max_retries=None, acks_late=True,
             soft_time_limit=settings.JOB_SOFT_TIME_LIMIT_SECONDS, time_limit=settings.JOB_HARD_TIME_LIMIT_SECONDS)
def run_job(self, job_id: int) -> None:
    """Run one job. Only a transient outage (the model backend, a replay webhook, the export storage) is retried,
    with exponential backoff."""
    try:
        services.execute_job(job_id=job_id)
    except Transient as exc:
        attempt = self.request.retries + 1
        max_attempts = settings.JOB_MAX_RETRIES + 1
        if attempt >= max_attempts:
            # The outage's own text (a backend's) is data, unless it was worded as a message (a replay runner's);
            # the sentence after it is ours.
            services.fail_job(job_id=job_id, error=Status(
                gettext_noop("%(detail)s It stayed unavailable after %(attempts)s attempts."),
                detail=exc.i18n if isinstance(exc, WordedError) and exc.i18n else exc.detail, attempts=attempt))
            return
        retry_in = settings.JOB_RETRY_BACKOFF_SECONDS * 2 ** self.request.retries
        services.mark_retrying(
            job_id=job_id, error=str(exc), retry_in=retry_in, attempt=attempt, max_attempts=max_attempts,
            **({"message": exc.retrying_message} if getattr(exc, "retrying_message", None) else {}),
        )
        raise self.retry(exc=exc, countdown=retry_in) from exc


def send_run_job(job_id: int) -> None:
    """Publish a job to the workers. Celery copies the publishing process's task time limits (here: the
    web server's settings) into the message, where they win over the worker's; sent without them, the
    limits of the worker that runs the job apply, set where the workers are configured. (A retry keeps
    the message's limits: none.)"""
    run_job.apply_async(args=[job_id], soft_time_limit=None, time_limit=None)


@shared_task(ignore_result=True)
def reap_jobs() -> dict:
    """Requeue jobs whose worker died; re-send jobs the broker may have lost. Run by every worker's
    embedded beat (`celery worker -B`) and once when a worker starts."""
    return services.reap_stale_jobs()


@worker_ready.connect
def reap_when_a_worker_starts(sender, **kwargs) -> None:
    # Only a publish from the worker's main process: the reap itself runs in a pool process.
    reap_jobs.apply_async(expires=settings.JOB_REAP_INTERVAL_SECONDS)
