"""The curation page of one trace, and the htmx endpoints of its case: one change at a time (error
step, category, diagnosis, evidence, evidence check), submit, and the model's draft."""

import json

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils.translation import gettext, gettext_lazy
from django.views.decorators.http import require_POST

from dataplatform.accounts.permissions import CAN_CURATE, project_for
from dataplatform.errors import PlatformError
from dataplatform.inputs import read, refusal_text

from .. import evidence_check, selectors, services
from ..inputs import CaseEditSerializer, VersionOnlySerializer
from .panels import back_to_trace, case_context, case_extras, draft_context, is_htmx, own_case

LONG_OBSERVATION = 600  # characters; a longer observation is folded in <details>
STALE_HINT = gettext_lazy("Your change was not saved; the case below is the current one.")


@login_required
def trace_page(request, slug: str, trace_id: int):
    project, _ = project_for(request.user, slug, CAN_CURATE)
    trace = selectors.trace_for(request.user, project, trace_id)
    case = services.open_case(trace=trace, curator=request.user)
    case = selectors.case_for(request.user, case.pk)
    return render(request, "corpora/aed/trace.html", {
        "project": project,
        "trace": trace,
        "steps": _steps(trace),
        "meta": json.dumps(trace.meta, indent=2, ensure_ascii=False, sort_keys=True) if trace.meta else "",
        "long_observation": LONG_OBSERVATION,
        **case_context(project, case),
        **draft_context(project, case),
        **case_extras(project, case),
    })


def _steps(trace) -> list[dict]:
    """The trace's steps for the template; `position` is what error_step and evidence refer to."""
    rows = []
    for position, step in enumerate(trace.steps):
        step = step if isinstance(step, dict) else {"content": step}
        observation = step.get("observation")
        observation = "" if observation is None else observation if isinstance(observation, str) else _json(observation)
        rows.append({"position": position, "index": step.get("index", position), "role": step.get("role") or "",
                     "content": _text(step.get("content")), "reasoning": _text(step.get("reasoning")),
                     "action": _text(step.get("action")),
                     "observation": observation, "folded": len(observation) > LONG_OBSERVATION})
    return rows


def _text(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else _json(value)


def _json(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _case_response(request, project, case, *, error: str = "", notice: str = "", status: int = 200):
    if not is_htmx(request):
        return back_to_trace(request, project, case, error=error, notice=notice)
    case = selectors.case_for(request.user, case.pk)  # the current state, also after a refused write
    return render(request, "corpora/aed/_case_swap.html",
                  {"project": project, **case_context(project, case, error=error, notice=notice),
                   **case_extras(project, case)}, status=status)


def _refusal(exc) -> str:
    """A refused change's message; a stale version adds that the change was not saved."""
    return f"{exc} {STALE_HINT}" if isinstance(exc, services.StaleCase) else refusal_text(exc)


@login_required
@require_POST
def case_edit(request, slug: str, case_id: int):
    """htmx: one change to the curator's case (error step, category, diagnosis, evidence, evidence check)."""
    project, case = own_case(request, slug, case_id)
    try:
        case = services.update_case(case=case, actor=request.user,
                                    **read(CaseEditSerializer, request.POST, case=case))
    except PlatformError as exc:  # shown in the case form it re-renders, with the error's status
        return _case_response(request, project, case, error=_refusal(exc), status=exc.status)
    return _case_response(request, project, case, notice=gettext("Saved (version %(version)s).") % {
        "version": case.version})


@login_required
@require_POST
def case_submit(request, slug: str, case_id: int):
    project, case = own_case(request, slug, case_id)
    try:
        case = services.submit_case(case=case, actor=request.user, **read(VersionOnlySerializer, request.POST))
    except PlatformError as exc:  # shown in the case form it re-renders, with the error's status
        return _case_response(request, project, case, error=_refusal(exc), status=exc.status)
    return _case_response(request, project, case, notice=gettext("Case submitted."))


@login_required
@require_POST
def case_draft(request, slug: str, case_id: int):
    """Start the model draft job; the draft box then polls `case_draft_status`."""
    project, case = own_case(request, slug, case_id)
    error = ""
    try:
        services.start_draft(case=case, user=request.user)
    except PlatformError as exc:  # shown in the draft box: a failed job whose row says why, or no job at all
        error = str(exc)
    if not is_htmx(request):
        return back_to_trace(request, project, case, error=error, notice=gettext("The model is drafting the case."))
    return render(request, "corpora/aed/_draft.html",
                  {"project": project, "case": case, **draft_context(project, case, draft_error=error)})


@login_required
@require_POST
def case_check(request, slug: str, case_id: int):
    """Start the model's evidence check; the model box then polls `case_draft_status` (the latest model job)."""
    project, case = own_case(request, slug, case_id)
    error = ""
    try:
        evidence_check.start_evidence_check(case=case, user=request.user)
    except PlatformError as exc:
        error = str(exc)
    if not is_htmx(request):
        return back_to_trace(request, project, case, error=error, notice=gettext("The model is checking the evidence."))
    return render(request, "corpora/aed/_draft.html",
                  {"project": project, "case": case, **draft_context(project, case, draft_error=error)})


@login_required
def case_draft_status(request, slug: str, case_id: int):
    """htmx poll of the latest draft job; once it ends, the case, proposals, grade and history follow (oob)."""
    project, case = own_case(request, slug, case_id)
    context = {"project": project, **draft_context(project, case)}
    job = context["draft_job"]
    if job is not None and job.is_terminal:
        case = selectors.case_for(request.user, case.pk)
        context |= {"refresh": True, **case_context(project, case), **case_extras(project, case)}
    context["case"] = case
    return render(request, "corpora/aed/_draft.html", context)
