"""HTML pages of the onPanda workflow: the queue, the workspace, imports and rollouts."""

import itertools

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from dataplatform import charts
from dataplatform import tools as mcp
from dataplatform.accounts.permissions import CAN_ANNOTATE, CAN_CURATE, CAN_MANAGE_PROJECT, project_for
from dataplatform.conversations.templates import FAMILIES
from dataplatform.errors import PlatformError, show_error
from dataplatform.imports import field_label, page_import
from dataplatform.inputs import InvalidInput, validated
from dataplatform.jobs import services as job_services
from dataplatform.jobs.models import Job
from dataplatform.pagination import parse_id

from . import importers, metrics, presenting, reviews, selectors, services
from .models import (
    CLAIM_STATE_WORDS,
    SESSION_STATUS_WORDS,
    NodeStatus,
    ReviewDecision,
    SeedPolicy,
    SessionStatus,
)
from .panda_json import UnreadableFile, import_panda_json, read_panda_upload
from .serializers import ConfigSerializer, PandaImportOptions, ReassignSerializer, ReviewSerializer

MAX_PANDA_PROBLEMS_SHOWN = 20  # of a .panda.json import's errors, and again of its warnings
# The seed policy in the queue's one-line summary of the settings (the form's menu has the long labels).
SEED_POLICY_SHORT = {
    SeedPolicy.FIXED: gettext_lazy("fixed"),
    SeedPolicy.PER_ITEM: gettext_lazy("per item"),
    SeedPolicy.RANDOM: gettext_lazy("random"),
}
# A token's channel in the metrics' chart of corrections (the values are the nodes').
CHANNEL_LABELS = {
    "reasoning": gettext_lazy("reasoning"),
    "content": gettext_lazy("answer"),
    "tool_name": gettext_lazy("tool name"),
    "tool_arguments": gettext_lazy("tool arguments"),
    "marker": gettext_lazy("template"),
    "unknown": gettext_lazy("unknown"),
}
def _with_state_labels(claims) -> list:
    claims = list(claims)
    for claim in claims:
        claim.state_label = CLAIM_STATE_WORDS.get(claim.state, claim.state)
        session = getattr(claim, "session", None)  # a claim has no session until its workspace opens
        if session is not None:
            claim.session_label = SESSION_STATUS_WORDS.get(session.status, session.status)
    return claims


@login_required
def queue_page(request, slug: str):
    project, role = project_for(request.user, slug, CAN_ANNOTATE)
    return _render_queue(request, project, role)


def _render_queue(request, project, role, *, import_report=None):
    context = {"project": project, "claims": _with_state_labels(selectors.my_claims(request.user, project)[:50]),
               "import_report": import_report}
    if role in CAN_CURATE:
        config = services.config_for(project)
        context |= {
            "curator": True,
            "queue": selectors.queue_state(project),
            "config": config,
            "seed_policies": SeedPolicy.choices,
            "seed_policy_label": SEED_POLICY_SHORT.get(config.seed_policy, config.seed_policy),
            "rollout_jobs": Job.objects.filter(project=project, kind="annotate.rollouts").order_by("-id")[:3],
            "all_claims": _with_state_labels(selectors.project_claims(project)[:50]),
            "annotators": selectors.annotators_of(project),
            "template_families": sorted(FAMILIES),
            "mcp_servers": mcp.server_names(),
            "is_admin": role in CAN_MANAGE_PROJECT,  # tool servers and auto-approve are an admin's choice
        }
    return render(request, "annotate/queue.html", context)


@login_required
@require_POST
def claim(request, slug: str):
    project, _role = project_for(request.user, slug, CAN_ANNOTATE, related=["annotation_config"])
    claimed = services.claim_with_session(project=project, annotator=request.user)
    if claimed is None:
        messages.info(request, _("No items left for you in this project right now."))
        return redirect("annotate-queue", slug=slug)
    return redirect("annotate-workspace", session_id=claimed.session.pk)


@login_required
@require_POST
def import_prompts(request, slug: str):
    project, role = project_for(request.user, slug, CAN_CURATE)
    result = page_import(request, importers.import_prompts, project=project)
    if result is None:
        messages.error(request, _("Choose a JSONL file to import."))
        return redirect("annotate-queue", slug=slug)
    return _render_queue(request, project, role, import_report=result)


@login_required
@require_POST
def import_panda(request, slug: str):
    """`.panda.json` files, each an item with a session of the importing curator: finished, or `live` (open
    under their claim, and they go on correcting it in the workspace). Each file imports whole or not at all,
    and the page reports each: its trees, dialogs and operators, or what is refused."""
    project, _role = project_for(request.user, slug, CAN_CURATE)
    uploads = request.FILES.getlist("file")
    if not uploads:
        messages.error(request, _("Choose a .panda.json file to import."))
        return redirect("annotate-queue", slug=slug)
    try:
        options = validated(PandaImportOptions(data=request.POST, context={"project": project}))
    except InvalidInput as exc:
        show_error(request, exc)
        return redirect("annotate-queue", slug=slug)
    dry_run, live = options["dry_run"], options["live"]
    annotator = options["annotator"] or request.user
    created = []
    for upload in uploads:
        try:
            data = read_panda_upload(upload)
        except UnreadableFile as exc:
            messages.error(request, str(exc))
            continue
        report = import_panda_json(project=project, data=data, annotator=annotator, file=upload.name,
                                   dry_run=dry_run, live=live)
        for error in report.errors[:MAX_PANDA_PROBLEMS_SHOWN]:
            messages.error(request, _("%(file)s, %(field)s: %(message)s")
                           % {"file": error.file, "field": field_label(error.field), "message": error.message})
        for warning in report.warnings[:MAX_PANDA_PROBLEMS_SHOWN]:
            messages.warning(request, _("%(file)s: %(warning)s") % {"file": upload.name, "warning": warning})
        if report.duplicate:
            messages.info(request, _("%(file)s was imported before; nothing added.") % {"file": upload.name})
        elif report.ok:
            done = (_("%(file)s checks out: %(summary)s.") if report.dry_run
                    else _("%(file)s imported: %(summary)s."))
            messages.success(request, done % {"file": upload.name, "summary": report.summary()})
        if report.created:
            created.append(report.session_id)
    if live and len(created) == 1:  # straight on to correcting it
        return redirect("annotate-workspace", session_id=created[0])
    return redirect("annotate-queue", slug=slug)


@login_required
@require_POST
def start_rollouts(request, slug: str):
    project, _role = project_for(request.user, slug, CAN_CURATE)
    try:  # the job kind's parameters (job_kinds.RolloutParams) are this form's input
        job = job_services.enqueue_job(project=project, kind="annotate.rollouts", params=request.POST,
                                       user=request.user)
    except PlatformError as exc:
        show_error(request, exc)
        return redirect("annotate-queue", slug=slug)
    messages.success(request, _("Job %(job)s is generating the model's responses.") % {"job": job.pk})
    return redirect("annotate-queue", slug=slug)


@login_required
def workspace(request, session_id: int):
    session = selectors.session_for(request.user, session_id)
    node = session.current_node
    project = session.item.project
    can_write = session.annotator_id == request.user.pk and session.status == SessionStatus.OPEN
    complete = node.status == NodeStatus.COMPLETE
    message = node.message or {}
    groups = selectors.token_groups(node)
    api = reverse("api-session", args=[session.pk])
    return render(request, "annotate/workspace.html", {
        "session": session,
        "status_word": SESSION_STATUS_WORDS.get(session.status, session.status),
        "project": project,
        "node": node,
        "blocks": presenting.response_layout(node, groups, selectors.backend_of(node)),
        "context_messages": presenting.context_messages(node),
        "tool_calls": presenting.tool_calls_to_decide(node) if can_write else [],
        "trees": presenting.tree_of(session),
        "context_json": presenting.pretty_json(node.context),
        "tools_json": presenting.pretty_json(node.tools),
        "can_write": can_write,
        "can_undo": node.parent_id is not None or node.key > 1,  # a later tree's root goes back where it began
        "can_continue": complete and node.finish_reason == "length",
        "can_new_round": complete and not message.get("tool_calls"),
        # A node just made streams when the page opens; an interrupted one (its stream failed, or was cancelled)
        # waits for the annotator's Retry, so that reloading after a cancel does not start it again.
        "needs_stream": can_write and node.status == NodeStatus.STREAMING,
        "interrupted": can_write and node.status == NodeStatus.INTERRUPTED,
        "urls": {
            "skip": reverse("api-annotate-claim-action", args=[project.slug, session.claim_id, "skip"]),
            "candidates": reverse("api-session-candidates", args=[session.pk, node.pk, 0]).rsplit("0/", 1)[0],
            "nodes": f"{api}nodes/",
            "stream": reverse("api-session-stream", args=[session.pk, node.pk]),
            **{name.replace("-", "_"): reverse(f"api-session-{name}", args=[session.pk]) for name in (
                "correct", "edit-selection", "continue-generating", "tool-calls", "new-round", "generate-new",
                "edit-prompt", "select", "cancel", "undo", "accept", "reject")},
            "next": reverse("annotate-claim", args=[project.slug]),
        },
    })


REVIEW_PAGE_SIZE = 25


@login_required
def review_page(request, slug: str):
    project, _role = project_for(request.user, slug, CAN_CURATE)
    sessions = selectors.sessions_to_review(project, pending=bool(request.GET.get("pending")))
    if before := parse_id(request.GET.get("before")):
        sessions = sessions.filter(pk__lt=before)
    page = list(sessions[: REVIEW_PAGE_SIZE + 1])
    first_errors = reviews.first_error_positions(page[:REVIEW_PAGE_SIZE])
    rows = [{"session": s, "review": (list(s.reviews.all()) or [None])[-1],
             "first_error": first_errors.get(s.pk)} for s in page[:REVIEW_PAGE_SIZE]]
    return render(request, "annotate/review.html", {
        "project": project, "rows": rows, "pending": bool(request.GET.get("pending")),
        "older_than": page[REVIEW_PAGE_SIZE - 1].pk if len(page) > REVIEW_PAGE_SIZE else None,
    })


@login_required
@require_POST
def review_session(request, session_id: int):
    session = selectors.session_for(request.user, session_id)
    project_for(request.user, session.item.project.slug, CAN_CURATE)
    try:
        review = reviews.review_session(session=session, reviewer=request.user,
                                        **validated(ReviewSerializer(data=request.POST)))
    except PlatformError as exc:
        show_error(request, exc)
    else:
        done = (_("Session %(session)s approved.") if review.decision == ReviewDecision.APPROVED
                else _("Session %(session)s rejected."))
        messages.success(request, done % {"session": session.pk})
    return redirect("annotate-review", slug=session.item.project.slug)


@login_required
def metrics_page(request, slug: str):
    project, _role = project_for(request.user, slug, CAN_CURATE)
    data = metrics.project_metrics(project, origin_sessions=False)  # the page shows their mean only
    fork_labels = [f"{int(a * 100)}–{int(b * 100)}%" for a, b in itertools.pairwise(data["fork_positions"]["edges"])]
    origin_mean = data["origin_ratios"]["mean"] or {}
    origins = [("model", _("model")), ("candidate", _("picked from top-k")), ("typed", _("typed"))]
    channels = data["corrections_by_channel"]
    return render(request, "annotate/metrics.html", {
        "project": project,
        "m": data,
        "charts": {
            "origins": charts.bar_chart([label for _key, label in origins], [origin_mean.get(k) for k, _label in origins],
                                        title=_("Token origins, mean share per accepted response")),
            "forks": charts.bar_chart(fork_labels, data["fork_positions"]["counts"],
                                      title=_("Where corrections fall in the response")),
            "ranks": charts.bar_chart(data["candidate_rank"]["labels"], data["candidate_rank"]["counts"],
                                      title=_("Rank of the chosen candidate")),
            "probabilities": charts.histogram(data["candidate_probability"]["edges"],
                                              data["candidate_probability"]["counts"],
                                              title=_("Probability of the chosen candidate")),
            "corrections": charts.bar_chart(data["corrections_per_item"]["labels"],
                                            data["corrections_per_item"]["counts"],
                                            title=_("Corrections per accepted response")),
            "channels": charts.bar_chart([CHANNEL_LABELS.get(channel, channel) for channel in channels],
                                         list(channels.values()),
                                         title=_("Corrections by channel (reasoning, content, tool calls)")),
            "rounds": charts.bar_chart([_("round %(number)s") % {"number": n} for n in data["corrections_by_round"]],
                                       list(data["corrections_by_round"].values()),
                                       title=_("Corrections by round")),
            "throughput": charts.bar_chart([t["annotator"] for t in data["throughput"]],
                                           [t["accepted"] for t in data["throughput"]],
                                           title=_("Accepted responses per annotator")),
        },
    })


@login_required
@require_POST
def reassign_claim(request, slug: str, claim_id: int):
    project, _role = project_for(request.user, slug, CAN_CURATE)
    claim = selectors.project_claims(project).filter(pk=claim_id).first()
    if claim is None:
        raise Http404(_("No such claim."))
    try:
        to_user = validated(ReassignSerializer(data=request.POST, context={"project": project}))["username"]
        services.reassign(claim=claim, to_user=to_user)
    except PlatformError as exc:
        show_error(request, exc)
    else:
        messages.success(request, _("Item %(item)s now goes to %(user)s.") % {
            "item": claim.item.external_id or claim.item_id, "user": to_user.username})
    return redirect("annotate-queue", slug=slug)


@login_required
@require_POST
def update_config(request, slug: str):
    project, role = project_for(request.user, slug, CAN_CURATE)
    try:
        changes = validated(ConfigSerializer(data=request.POST, partial=True))
    except InvalidInput as exc:
        show_error(request, exc)
    else:  # a setting this role may not change is a 403, as over the API
        services.update_config(project=project, changes=changes, role=role)
        messages.success(request, _("Settings saved."))
    return redirect("annotate-queue", slug=slug)
