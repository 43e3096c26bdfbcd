"""HTML views for jobs: start, watch (htmx progress partial), cancel."""

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from dataplatform import inputs
from dataplatform.accounts.permissions import CAN_RUN_JOBS, project_for, require_role, role_in
from dataplatform.broker import ping_workers
from dataplatform.errors import PlatformError, show_error
from dataplatform.registry import UnknownKind

from . import selectors, services
from .inputs import JobCreateSerializer
from .models import Job, JobState
from .registry import get_kind

# A job queued longer than this makes the page check whether any worker is alive.
STALL_AFTER = timedelta(seconds=10)


@login_required
@require_POST
def job_create(request, slug: str):
    project, _role = project_for(request.user, slug, CAN_RUN_JOBS)
    try:
        job = services.enqueue_job(project=project, user=request.user, **inputs.read(JobCreateSerializer, request.POST))
    except PlatformError as exc:  # back to the form, with the message (unknown kind, bad params, full queue...)
        show_error(request, exc)
        return redirect("project-detail", slug=slug)
    return redirect("job-detail", job_id=job.pk)


def stalled_reason(job: Job | None) -> str | None:
    """Queued for a while with no worker alive: say so (the job pages, and the apps' pages that show a job)."""
    return stalled_reasons([job]).get(job.pk) if job is not None else None


def stalled_reasons(jobs) -> dict[int, str]:
    """`stalled_reason` of the jobs a page shows, by job id (those not stalled left out), with one ping of the
    workers for all of them: with none alive, each ping waits its whole timeout (three replays' jobs made a page
    take 1.5 s)."""
    now = timezone.now()
    waiting = [job for job in jobs if job is not None and job.state == JobState.QUEUED
               and now - job.created_at >= STALL_AFTER]
    if not waiting:
        return {}
    workers = ping_workers(timeout=0.5, limit=1)  # one answer is enough: a worker is alive
    if workers.ok:
        return {}
    return {job.pk: _("This job has been queued for %(seconds)d s and %(workers)s") % {
        "seconds": (now - job.created_at).seconds, "workers": workers.detail} for job in waiting}


@login_required
def job_detail(request, job_id: int):
    job = selectors.job_for(request.user, job_id)
    may_run = role_in(request.user, job.project) in CAN_RUN_JOBS
    return render(request, "jobs/job_detail.html", {
        "job": job, "can_cancel": may_run and not job.is_terminal,
        "can_retry": may_run and job.state in (JobState.FAILED, JobState.CANCELLED),
        "stalled_reason": stalled_reason(job), "refresh_on_finish": True, "kind_label": _kind_label(job.kind),
    })


def _kind_label(name: str) -> str | None:
    """The title of a job's kind in the page's language (None for a kind this version no longer has)."""
    try:
        return get_kind(name).label
    except UnknownKind:
        return None


@login_required
def job_progress(request, job_id: int):
    job = selectors.job_for(request.user, job_id)
    return render(request, "frontend/progress.html", {
        "job": job, "stalled_reason": stalled_reason(job), "refresh_on_finish": True,
    })


@login_required
@require_POST
def job_retry(request, job_id: int):
    job = selectors.job_for(request.user, job_id)
    require_role(request.user, job.project, CAN_RUN_JOBS)
    try:
        services.retry_job(job=job)
    except PlatformError as exc:
        show_error(request, exc)
    else:
        messages.success(request, _("Job %(id)d queued again.") % {"id": job.pk})
    return redirect("job-detail", job_id=job.pk)


@login_required
@require_POST
def job_cancel(request, job_id: int):
    job = selectors.job_for(request.user, job_id)
    require_role(request.user, job.project, CAN_RUN_JOBS)
    services.cancel_job(job=job)
    messages.success(request, _("Cancel requested for job %(id)d.") % {"id": job.pk})
    return redirect("job-detail", job_id=job.pk)

