"""The htmx endpoints of a case's proposals and their replays: add a proposal, accept, reject or reopen
it, start a two-arm replay, and poll a replay until its table and statistics are in."""

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render
from django.utils.translation import gettext, ngettext
from django.views.decorators.http import require_POST

from dataplatform.accounts.permissions import CAN_CURATE, project_for
from dataplatform.errors import PlatformError
from dataplatform.inputs import read, refusal_text
from dataplatform.jobs.views import stalled_reason

from .. import selectors, services
from ..inputs import ProposalCreateSerializer, ProposalStatusSerializer, ReplayCreateSerializer
from .panels import back_to_trace, case_extras, is_htmx, own_case, own_proposal, replay_view


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
        services.add_proposal(case=case, actor=request.user, **read(ProposalCreateSerializer, request.POST))
    except PlatformError as exc:  # shown in the proposals box
        return _proposals_response(request, project, case, error=refusal_text(exc), status=exc.status)
    return _proposals_response(request, project, case, notice=gettext("Proposal added."))


@login_required
@require_POST
def proposal_status(request, slug: str, proposal_id: int):
    """Accept, reject or reopen a proposal; a rejected proposal stays listed with its status."""
    project, proposal = own_proposal(request, slug, proposal_id)
    try:
        services.set_proposal_status(proposal=proposal, actor=request.user,
                                     **read(ProposalStatusSerializer, request.POST))
    except PlatformError as exc:  # shown in the proposals box
        return _proposals_response(request, project, proposal.case, error=refusal_text(exc), status=exc.status)
    return _proposals_response(request, project, proposal.case,
                               notice=gettext("Proposal %(id)s is now %(status)s.") % {
                                   "id": proposal.pk, "status": proposal.get_status_display().lower()})


@login_required
@require_POST
def replay_start(request, slug: str, proposal_id: int):
    project, proposal = own_proposal(request, slug, proposal_id)
    try:
        replay = services.start_replay(proposal=proposal, user=request.user,
                                       **read(ReplayCreateSerializer, request.POST))
    # Shown in the proposals box. Broker down: the replay and its job exist, the job is marked failed;
    # queue full: nothing was written.
    except PlatformError as exc:
        return _proposals_response(request, project, proposal.case, error=refusal_text(exc), status=exc.status)
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
    view = replay_view(project, replay, replay.job, selectors.grading_of(project).alpha,
                       stalled=stalled_reason(replay.job))
    context = {"project": project, "r": view}
    if replay.job is None or replay.job.is_terminal:
        context |= {"refresh": True, **case_extras(project, case)}
    return render(request, "corpora/aed/_replay_swap.html", context)
