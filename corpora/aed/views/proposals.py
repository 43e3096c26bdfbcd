"""The htmx endpoints of a case's proposals and their replays: add a proposal, accept, reject or reopen
it, start a two-arm replay, and poll a replay until its table and statistics are in."""

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render
from django.utils.translation import gettext, ngettext
from django.views.decorators.http import require_POST

from dataplatform.accounts.permissions import CAN_CURATE, project_for
from dataplatform.errors import PlatformError

from .. import selectors, services
from ..models import ProposalStatus
from .panels import (
    MAX_REPLAY_STEPS,
    REPLAY_DEFAULTS,
    back_to_trace,
    case_extras,
    is_htmx,
    own_case,
    own_proposal,
    replay_view,
    whole_number,
)


def _proposals_response(request, project, case, *, error: str = "", notice: str = "", status: int = 200):
    if not is_htmx(request):
        return back_to_trace(request, project, case, error=error, notice=notice)
    return render(request, "corpora/aed/_proposals_swap.html",
                  {"project": project, "case": case, "proposal_notice": notice,
                   **case_extras(project, case, proposal_error=error)}, status=status)


@login_required
@require_POST
def proposal_add(request, slug: str, case_id: int):
    project, case = own_case(request, slug, case_id)
    try:
        services.add_proposal(case=case, actor=request.user, corrected_action=request.POST.get("corrected_action", ""),
                              rationale=request.POST.get("rationale", "").strip())
    except services.CurationError as exc:  # shown in the proposals box
        return _proposals_response(request, project, case, error=str(exc), status=exc.status)
    return _proposals_response(request, project, case, notice=gettext("Proposal added."))


@login_required
@require_POST
def proposal_status(request, slug: str, proposal_id: int):
    """Accept, reject or reopen a proposal; a rejected proposal stays listed with its status."""
    project, proposal = own_proposal(request, slug, proposal_id)
    status = request.POST.get("status", "")
    try:
        if status not in ProposalStatus.values:
            raise services.CurationError(gettext("status must be one of %(values)s.") % {
                "values": ", ".join(ProposalStatus.values)})
        services.set_proposal_status(proposal=proposal, status=status, actor=request.user)
    except services.CurationError as exc:  # shown in the proposals box
        return _proposals_response(request, project, proposal.case, error=str(exc), status=exc.status)
    return _proposals_response(request, project, proposal.case,
                               notice=gettext("Proposal %(id)s is now %(status)s.") % {
                                   "id": proposal.pk, "status": proposal.get_status_display().lower()})


def _float(value: str, name: str) -> float:
    try:
        return float(str(value).strip())
    except ValueError:
        raise services.CurationError(gettext("%(name)s must be a number.") % {"name": name}) from None


def _replay_options(post, runner: str) -> dict:
    max_steps = whole_number(post.get("max_steps") or REPLAY_DEFAULTS["max_steps"], "max_steps")
    temperature = _float(post.get("temperature") or REPLAY_DEFAULTS["temperature"], "temperature")
    if not 1 <= max_steps <= MAX_REPLAY_STEPS:
        raise services.CurationError(gettext("max_steps must be between 1 and %(max)s.") % {"max": MAX_REPLAY_STEPS})
    if not 0 <= temperature <= 2:
        raise services.CurationError(gettext("temperature must be between 0 and 2."))
    options = {"max_steps": max_steps, "temperature": temperature}
    if runner == "webhook":
        options["url"] = post.get("url", "").strip()  # start_replay checks it against AED_REPLAY_WEBHOOKS
    return options


@login_required
@require_POST
def replay_start(request, slug: str, proposal_id: int):
    project, proposal = own_proposal(request, slug, proposal_id)
    runner = request.POST.get("runner", "builtin")
    try:
        replay = services.start_replay(
            proposal=proposal, pairs=whole_number(request.POST.get("pairs") or REPLAY_DEFAULTS["pairs"], "pairs"),
            runner=runner, seed=whole_number(request.POST.get("seed") or 0, "seed"),
            retry=request.POST.get("retry") or "resample", mode=request.POST.get("mode") or "paired",
            hint=bool(request.POST.get("hint")),
            options=_replay_options(request.POST, runner), user=request.user)
    # Shown in the proposals box. Broker down: the replay and its job exist, the job is marked failed;
    # queue full: nothing was written.
    except PlatformError as exc:
        return _proposals_response(request, project, proposal.case, error=str(exc), status=exc.status)
    return _proposals_response(request, project, proposal.case,
                               notice=ngettext("Replay %(id)s started (%(pairs)s pair).",
                                               "Replay %(id)s started (%(pairs)s pairs).",
                                               replay.pairs) % {"id": replay.pk, "pairs": replay.pairs})


@login_required
def replay_detail(request, slug: str, replay_id: int):
    """htmx poll of one replay: its job's progress, then the 2x2 table and statistics (and the grade, oob)."""
    project, _ = project_for(request.user, slug, CAN_CURATE)
    replay = selectors.replay_for(request.user, replay_id)
    case = replay.proposal.case
    if case.trace.project_id != project.pk:
        raise Http404("No such replay.")
    view = replay_view(project, replay, replay.job, selectors.grading_of(project).alpha)
    context = {"project": project, "r": view}
    if replay.job is None or replay.job.is_terminal:
        context |= {"refresh": True, **case_extras(project, case)}
    return render(request, "corpora/aed/_replay_swap.html", context)
