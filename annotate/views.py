"""HTML pages of the onPanda workflow: the queue, the workspace, imports and rollouts."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from dataplatform.accounts.permissions import CAN_ANNOTATE, CAN_CURATE, project_for
from dataplatform.broker import BrokerUnavailable
from dataplatform.jobs import services as job_services
from dataplatform.jobs.models import Job

from . import importers, selectors, services
from .models import NodeStatus, SessionStatus

MAX_ERRORS_SHOWN = 20


@login_required
def queue_page(request, slug: str):
    project, role = project_for(request.user, slug, CAN_ANNOTATE)
    context = {"project": project, "claims": selectors.my_claims(request.user, project)[:50]}
    if role in CAN_CURATE:
        context |= {
            "curator": True,
            "queue": selectors.queue_state(project),
            "config": services.config_for(project),
            "rollout_jobs": Job.objects.filter(project=project, kind="annotate.rollouts").order_by("-id")[:3],
            "all_claims": selectors.project_claims(project)[:50],
        }
    return render(request, "annotate/queue.html", context)


@login_required
@require_POST
def claim(request, slug: str):
    project, _ = project_for(request.user, slug, CAN_ANNOTATE)
    claimed = services.claim_next(project=project, annotator=request.user)
    if claimed is None:
        messages.info(request, "No items left for you in this project right now.")
        return redirect("annotate-queue", slug=slug)
    session = services.open_session(claim=claimed)
    return redirect("annotate-workspace", session_id=session.pk)


@login_required
@require_POST
def import_prompts(request, slug: str):
    project, _ = project_for(request.user, slug, CAN_CURATE)
    upload = request.FILES.get("file")
    if upload is None:
        messages.error(request, "Choose a JSONL file to import.")
        return redirect("annotate-queue", slug=slug)
    report = importers.import_prompts(project=project, lines=upload, file=upload.name,
                                      dry_run=bool(request.POST.get("dry_run")),
                                      skip_bad_lines=bool(request.POST.get("skip_bad_lines")))
    for error in report.errors[:MAX_ERRORS_SHOWN]:
        messages.error(request, f"{error.file}, line {error.line}, {error.field}: {error.message}")
    if len(report.errors) > MAX_ERRORS_SHOWN:
        messages.error(request, f"… and {len(report.errors) - MAX_ERRORS_SHOWN} more errors.")
    if report.errors and not report.dry_run and not request.POST.get("skip_bad_lines"):
        messages.error(request, f"{upload.name}: nothing imported; fix the lines above or tick 'skip bad lines'.")
    elif report.dry_run:
        messages.success(request, f"{upload.name} (dry run): {report.lines} lines checked, "
                                  f"{len(report.errors)} bad, {report.duplicates} duplicates; nothing written.")
    else:
        messages.success(request, f"{upload.name}: imported {report.created} prompts; "
                                  f"{report.duplicates} duplicates, {len(report.errors)} bad lines skipped.")
    return redirect("annotate-queue", slug=slug)


@login_required
@require_POST
def start_rollouts(request, slug: str):
    project, _ = project_for(request.user, slug, CAN_CURATE)
    try:
        job = job_services.enqueue_job(project=project, kind="annotate.rollouts", params={}, user=request.user)
    except BrokerUnavailable as exc:
        messages.error(request, str(exc))
        return redirect("annotate-queue", slug=slug)
    messages.success(request, f"Job {job.pk} is generating the model's responses.")
    return redirect("annotate-queue", slug=slug)


@login_required
def workspace(request, session_id: int):
    session = selectors.session_for(request.user, session_id)
    node = session.current_node
    can_write = session.annotator_id == request.user.pk and session.status == SessionStatus.OPEN
    return render(request, "annotate/workspace.html", {
        "session": session,
        "project": session.item.project,
        "node": node,
        "groups": selectors.token_groups(node),
        "can_write": can_write,
        "needs_stream": can_write and node.status in (NodeStatus.STREAMING, NodeStatus.INTERRUPTED),
        "urls": {
            "candidates": reverse("api-session-candidates", args=[session.pk, node.pk, 0]).rsplit("0/", 1)[0],
            "correct": reverse("api-session-correct", args=[session.pk]),
            "stream": reverse("api-session-stream", args=[session.pk, node.pk]),
            "undo": reverse("api-session-undo", args=[session.pk]),
            "accept": reverse("api-session-accept", args=[session.pk]),
            "reject": reverse("api-session-reject", args=[session.pk]),
            "next": reverse("annotate-claim", args=[session.item.project.slug]),
        },
    })
