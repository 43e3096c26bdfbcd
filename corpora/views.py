"""HTML pages of AED (agent error diagnosis): the overview (trace import and the trace list), the
curation page of one trace (the curator's case, edited through htmx; model drafts; proposals and
their replays; the grade; the history), and the corpus dashboard.

Curators and admins (CAN_CURATE) only: annotators and trainers get 403, outsiders 404. A curator
writes only their own case (someone else's case is a 404, as in the labeler). Every write goes
through `corpora.aed.services`, every read through `corpora.aed.selectors`. Trace text, diagnoses
and model output are rendered by the templates with auto-escaping, never marked safe.

htmx endpoints answer with the partial they change plus out-of-band copies of the grade and the
history; without htmx (no `HX-Request` header) they redirect to the trace page with a message.
A stale case version answers 409, a refused value 400, each with the current case and a message.
"""

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Exists, F, Func, IntegerField, OuterRef
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from annotate.charts import bar_chart
from dataplatform.accounts.permissions import CAN_CURATE, project_for
from dataplatform.broker import BrokerUnavailable
from dataplatform.imports import page_import
from dataplatform.jobs.models import Job, JobState
from dataplatform.jobs.services import JobQueueFull
from dataplatform.jobs.views import STALL_AFTER
from dataplatform.system.selectors import worker_status

from .aed import importers, runners, selectors, services, stats
from .aed.models import CaseStatus, EvidenceCheck, ProposalStatus
from .aed.taxonomy import shipped_error_taxonomy

PAGE_SIZE = 50
MAX_FILTER_CHOICES = 200
LONG_OBSERVATION = 600  # characters; a longer observation is folded in <details>
DRAFT_KIND = "aed.draft"
CASE_FILTERS = [("with", "with a case"), ("without", "without a case"), ("submitted", "with a submitted case")]
GRADE_FILTERS = [*stats.GRADE_ORDER, "ungraded"]
TRACE_FILTERS = ("environment", "harness", "policy_model")
REPLAY_DEFAULTS = {"pairs": 10, "seed": 0, "max_steps": 6, "temperature": 0.7}
MAX_REPLAY_STEPS = 50
GRADE_TEXT = dict(stats.GRADE_RULES)


# --- overview: import and trace list ---------------------------------------------------------------

@login_required
def overview(request, slug: str):
    project, _ = project_for(request.user, slug, CAN_CURATE)
    return _render_overview(request, project)


def _render_overview(request, project, *, import_report=None):
    traces = selectors.traces_visible_to(request.user, project)
    filters = {key: request.GET.get(key, "").strip() for key in (*TRACE_FILTERS, "case", "grade")}
    listed = traces
    for field in TRACE_FILTERS:
        if filters[field]:
            listed = listed.filter(**{field: filters[field]})
    cases = selectors.cases_of(project).prefetch_related(None).filter(trace=OuterRef("pk"))
    if filters["case"] == "with":
        listed = listed.filter(Exists(cases))
    elif filters["case"] == "without":
        listed = listed.filter(~Exists(cases))
    elif filters["case"] == "submitted":
        listed = listed.filter(Exists(cases.filter(status=CaseStatus.SUBMITTED)))
    if filters["grade"] in GRADE_FILTERS:
        # Grades are computed from replay statistics in Python; a project's hand-curated cases are few.
        graded = {case.trace_id for case in selectors.cases_of(project)
                  if (selectors.grade_of(case) or "ungraded") == filters["grade"]}
        listed = listed.filter(pk__in=sorted(graded))
    listed = (listed.defer("steps", "meta").order_by("id")
              .annotate(n_steps=Func(F("steps"), function="jsonb_array_length", output_field=IntegerField())))
    page = Paginator(listed, PAGE_SIZE).get_page(request.GET.get("page"))
    by_trace: dict[int, list] = {}
    if page.object_list:
        for case in selectors.cases_of(project).filter(trace__in=[t.pk for t in page]):
            by_trace.setdefault(case.trace_id, []).append({"case": case, "grade": selectors.grade_of(case)})
    statuses = dict(selectors.cases_of(project).prefetch_related(None).order_by()
                    .values_list("status").annotate(n=Count("pk")))
    return render(request, "corpora/aed/overview.html", {
        "project": project,
        "import_report": import_report,
        "counts": {"traces": traces.count(), "cases": sum(statuses.values()),
                   "submitted": statuses.get(CaseStatus.SUBMITTED, 0)},
        "filters": filters,
        "choices": {field: list(traces.order_by(field).values_list(field, flat=True).distinct()[:MAX_FILTER_CHOICES])
                    for field in TRACE_FILTERS},
        "case_filters": CASE_FILTERS,
        "grade_filters": GRADE_FILTERS,
        "page": page,
        "rows": [{"trace": trace, "cases": by_trace.get(trace.pk, [])} for trace in page],
    })


@login_required
@require_POST
def import_file(request, slug: str):
    project, _ = project_for(request.user, slug, CAN_CURATE)
    result = page_import(request, importers.import_traces, project=project, user=request.user)
    if result is None:
        messages.error(request, "Choose a JSONL file of traces.")
        return redirect("aed-overview", slug=slug)
    return _render_overview(request, project, import_report=result)


# --- the curation page -----------------------------------------------------------------------------

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
        **_case_context(project, case),
        **_draft_context(project, case),
        **_extras(project, case),
    })


def _steps(trace) -> list[dict]:
    """The trace's steps for the template; `position` is what error_step and evidence refer to."""
    rows = []
    for position, step in enumerate(trace.steps):
        step = step if isinstance(step, dict) else {"content": step}
        observation = step.get("observation")
        observation = "" if observation is None else observation if isinstance(observation, str) else _json(observation)
        rows.append({"position": position, "index": step.get("index", position), "role": step.get("role") or "",
                     "content": _text(step.get("content")), "action": _text(step.get("action")),
                     "observation": observation, "folded": len(observation) > LONG_OBSERVATION})
    return rows


def _text(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else _json(value)


def _json(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _case_context(project, case, *, error: str = "", notice: str = "") -> dict:
    categories = case.taxonomy.categories
    return {
        "case": case,
        "categories": categories,
        "category": next((c for c in categories if c["slug"] == case.category), None),
        "evidence_checks": [(value, name) for value, name in EvidenceCheck.choices],
        "evidence_steps": " ".join(str(ref["step"]) for ref in case.evidence),
        "last_step": len(case.trace.steps) - 1,
        "error": error,
        "notice": notice,
        "edit_url": reverse("aed-case-edit", args=[project.slug, case.pk]),
        "submit_url": reverse("aed-case-submit", args=[project.slug, case.pk]),
    }


def _draft_context(project, case, *, draft_error: str = "") -> dict:
    job = Job.objects.filter(project=project, kind=DRAFT_KIND, params__case=case.pk).order_by("-id").first()
    return {"draft_job": job, "draft_error": draft_error, "stalled_reason": _stalled_reason(job),
            "draft_url": reverse("aed-case-draft", args=[project.slug, case.pk]),
            "draft_status_url": reverse("aed-case-draft-status", args=[project.slug, case.pk])}


def _extras(project, case, *, proposal_error: str = "") -> dict:
    """The proposals with their replays, the grade and the history of a case."""
    graded = selectors.cases_of(project).get(pk=case.pk)
    grade = selectors.grade_of(graded)
    best_proposal, best_replay = selectors.evidence_of(graded)
    proposals = list(graded.proposals.all())
    replays = [replay for proposal in proposals for replay in proposal.replays.all()]
    jobs = Job.objects.in_bulk([r.job_id for r in replays if r.job_id])
    return {
        "grade": grade,
        "grade_text": GRADE_TEXT.get(grade, "No rule applies yet: check the evidence or replay a proposal."),
        "grade_rules": stats.GRADE_RULES,
        "grade_proposal": best_proposal,
        "grade_replay": best_replay,
        "proposals": [{"proposal": p, "replays": [_replay_view(project, r, jobs.get(r.job_id))
                                                  for r in p.replays.all()]} for p in proposals],
        "proposal_error": proposal_error,
        "proposal_add_url": reverse("aed-proposal-add", args=[project.slug, case.pk]),
        "runners": list(runners.RUNNERS),
        "replay_defaults": REPLAY_DEFAULTS,
        "max_pairs": services.MAX_REPLAY_PAIRS,
        "max_replay_steps": MAX_REPLAY_STEPS,
        "events": [{"event": e, "payload": json.dumps(e.payload, ensure_ascii=False) if e.payload else ""}
                   for e in case.events.select_related("actor").order_by("id")],
    }


def _replay_view(project, replay, job) -> dict:
    s = replay.stats or {}
    return {
        "replay": replay,
        "job": job,
        "stalled_reason": _stalled_reason(job),
        "url": reverse("aed-replay", args=[project.slug, replay.pk]),
        "options": ", ".join(f"{k}={v}" for k, v in sorted(replay.options.items()) if k not in ("url", "headers")),
        "webhook": replay.options.get("url", "") if replay.runner == "webhook" else "",
        "has_stats": bool(s.get("pairs")),
        "pairs_done": s.get("pairs", 0),
        "pass_rate_c": _percent(s.get("pass_rate_c")),
        "pass_rate_r": _percent(s.get("pass_rate_r")),
        "net_gain": _signed(s.get("net_gain")),
        "ci": f"[{_signed(s['ci_low'])}, {_signed(s['ci_high'])}]" if "ci_low" in s else "",
        "mcnemar_p": f"{s['mcnemar_p']:.3g}" if "mcnemar_p" in s else "",
        "significant": s.get("significant", False),
    }


def _percent(value) -> str:
    return "—" if value is None else f"{value:.0%}"


def _signed(value) -> str:
    return "—" if value is None else f"{value:+.3f}"


def _stalled_reason(job) -> str:
    """Queued for a while with no worker alive: say so (as the jobs page does)."""
    if job is None or job.state != JobState.QUEUED or timezone.now() - job.created_at < STALL_AFTER:
        return ""
    workers = worker_status(timeout=0.5)
    if workers.ok:
        return ""
    return f"This job has been queued for {(timezone.now() - job.created_at).seconds} s and {workers.detail}"


def _htmx(request) -> bool:
    return request.headers.get("HX-Request") == "true"


def _version(request) -> int:
    try:
        return int(request.POST.get("version", ""))
    except ValueError:
        return -1


def _own_case(request, slug: str, case_id: int):
    """The project and the requesting curator's own case (anyone else's: 404)."""
    project, _ = project_for(request.user, slug, CAN_CURATE)
    case = selectors.case_for(request.user, case_id)
    if case.trace.project_id != project.pk or case.curator_id != request.user.pk:
        raise Http404("No such case.")
    return project, case


def _own_proposal(request, slug: str, proposal_id: int):
    project, _ = project_for(request.user, slug, CAN_CURATE)
    proposal = selectors.proposal_for(request.user, proposal_id)
    if proposal.case.trace.project_id != project.pk or proposal.case.curator_id != request.user.pk:
        raise Http404("No such proposal.")
    return project, proposal


def _back_to_trace(request, project, case, *, error: str = "", notice: str = ""):
    if error:
        messages.error(request, error)
    elif notice:
        messages.success(request, notice)
    return redirect("aed-trace", slug=project.slug, trace_id=case.trace_id)


STALE_HINT = " Your change was not saved; the case below is the current one."


def _case_response(request, project, case, *, error: str = "", notice: str = "", status: int = 200):
    if not _htmx(request):
        return _back_to_trace(request, project, case, error=error, notice=notice)
    case = selectors.case_for(request.user, case.pk)  # the current state, also after a refused write
    return render(request, "corpora/aed/_case_swap.html",
                  {"project": project, **_case_context(project, case, error=error, notice=notice),
                   **_extras(project, case)}, status=status)


def _changes(post, case) -> dict:
    """The update_case changes one edit form asks for."""
    field, value = post.get("field", ""), post.get("value", "")
    if field == "error_step":
        return {"error_step": _int(value, "error_step") if value.strip() else None}
    if field in ("category", "evidence_check"):
        return {field: value}
    if field == "diagnosis":
        return {"diagnosis": value.strip()}
    if field == "evidence_add":
        quote = post.get("quote", "").strip()
        ref = {"step": _int(post.get("step", ""), "evidence step"), **({"quote": quote} if quote else {})}
        return {"evidence": [*case.evidence, ref]}
    if field == "evidence_remove":
        position = _int(value, "evidence position")
        if not 0 <= position < len(case.evidence):
            raise services.CurationError("No such evidence reference; reload the page.")
        return {"evidence": [ref for n, ref in enumerate(case.evidence) if n != position]}
    raise services.CurationError(f"Unknown field {field!r}.")


def _int(value: str, name: str) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise services.CurationError(f"{name} must be a whole number.") from None


def _float(value: str, name: str) -> float:
    try:
        return float(str(value).strip())
    except ValueError:
        raise services.CurationError(f"{name} must be a number.") from None


@login_required
@require_POST
def case_edit(request, slug: str, case_id: int):
    """htmx: one change to the curator's case (error step, category, diagnosis, evidence, evidence check)."""
    project, case = _own_case(request, slug, case_id)
    try:
        case = services.update_case(case=case, version=_version(request), actor=request.user,
                                    changes=_changes(request.POST, case))
    except services.StaleCase as exc:
        return _case_response(request, project, case, error=f"{exc}{STALE_HINT}", status=409)
    except services.CurationError as exc:
        return _case_response(request, project, case, error=str(exc), status=400)
    return _case_response(request, project, case, notice=f"Saved (version {case.version}).")


@login_required
@require_POST
def case_submit(request, slug: str, case_id: int):
    project, case = _own_case(request, slug, case_id)
    try:
        case = services.submit_case(case=case, version=_version(request), actor=request.user)
    except services.StaleCase as exc:
        return _case_response(request, project, case, error=f"{exc}{STALE_HINT}", status=409)
    except services.CurationError as exc:
        return _case_response(request, project, case, error=str(exc), status=400)
    return _case_response(request, project, case, notice="Case submitted.")


@login_required
@require_POST
def case_draft(request, slug: str, case_id: int):
    """Start the model draft job; the draft box then polls `case_draft_status`."""
    project, case = _own_case(request, slug, case_id)
    error = ""
    try:
        services.start_draft(case=case, user=request.user)
    except (BrokerUnavailable, JobQueueFull) as exc:  # a failed job whose row says why, or no job at all
        error = str(exc)
    if not _htmx(request):
        return _back_to_trace(request, project, case, error=error, notice="The model is drafting the case.")
    return render(request, "corpora/aed/_draft.html",
                  {"project": project, "case": case, **_draft_context(project, case, draft_error=error)})


@login_required
def case_draft_status(request, slug: str, case_id: int):
    """htmx poll of the latest draft job; once it ends, the case, proposals, grade and history follow (oob)."""
    project, case = _own_case(request, slug, case_id)
    context = {"project": project, **_draft_context(project, case)}
    job = context["draft_job"]
    if job is not None and job.is_terminal:
        case = selectors.case_for(request.user, case.pk)
        context |= {"refresh": True, **_case_context(project, case), **_extras(project, case)}
    context["case"] = case
    return render(request, "corpora/aed/_draft.html", context)


# --- proposals and replays -------------------------------------------------------------------------

def _proposals_response(request, project, case, *, error: str = "", notice: str = "", status: int = 200):
    if not _htmx(request):
        return _back_to_trace(request, project, case, error=error, notice=notice)
    return render(request, "corpora/aed/_proposals_swap.html",
                  {"project": project, "case": case, "proposal_notice": notice,
                   **_extras(project, case, proposal_error=error)}, status=status)


@login_required
@require_POST
def proposal_add(request, slug: str, case_id: int):
    project, case = _own_case(request, slug, case_id)
    try:
        services.add_proposal(case=case, actor=request.user, corrected_action=request.POST.get("corrected_action", ""),
                              rationale=request.POST.get("rationale", "").strip())
    except services.CurationError as exc:
        return _proposals_response(request, project, case, error=str(exc), status=400)
    return _proposals_response(request, project, case, notice="Proposal added.")


@login_required
@require_POST
def proposal_status(request, slug: str, proposal_id: int):
    """Accept, reject or reopen a proposal; a rejected proposal stays listed with its status."""
    project, proposal = _own_proposal(request, slug, proposal_id)
    status = request.POST.get("status", "")
    try:
        if status not in ProposalStatus.values:
            raise services.CurationError(f"status must be one of {', '.join(ProposalStatus.values)}.")
        services.set_proposal_status(proposal=proposal, status=status, actor=request.user)
    except services.CurationError as exc:
        return _proposals_response(request, project, proposal.case, error=str(exc), status=400)
    return _proposals_response(request, project, proposal.case,
                               notice=f"Proposal {proposal.pk} is now {proposal.get_status_display().lower()}.")


def _replay_options(post, runner: str) -> dict:
    max_steps = _int(post.get("max_steps") or REPLAY_DEFAULTS["max_steps"], "max_steps")
    temperature = _float(post.get("temperature") or REPLAY_DEFAULTS["temperature"], "temperature")
    if not 1 <= max_steps <= MAX_REPLAY_STEPS:
        raise services.CurationError(f"max_steps must be between 1 and {MAX_REPLAY_STEPS}.")
    if not 0 <= temperature <= 2:
        raise services.CurationError("temperature must be between 0 and 2.")
    options = {"max_steps": max_steps, "temperature": temperature}
    if runner == "webhook":
        options["url"] = post.get("url", "").strip()  # start_replay checks it against AED_REPLAY_WEBHOOKS
    return options


@login_required
@require_POST
def replay_start(request, slug: str, proposal_id: int):
    project, proposal = _own_proposal(request, slug, proposal_id)
    runner = request.POST.get("runner", "builtin")
    try:
        replay = services.start_replay(
            proposal=proposal, pairs=_int(request.POST.get("pairs") or REPLAY_DEFAULTS["pairs"], "pairs"),
            runner=runner, seed=_int(request.POST.get("seed") or 0, "seed"),
            options=_replay_options(request.POST, runner), user=request.user)
    except services.CurationError as exc:
        return _proposals_response(request, project, proposal.case, error=str(exc), status=400)
    except BrokerUnavailable as exc:  # the replay and its job exist; the job is marked failed
        return _proposals_response(request, project, proposal.case, error=str(exc), status=503)
    except JobQueueFull as exc:  # nothing was written
        return _proposals_response(request, project, proposal.case, error=str(exc), status=429)
    return _proposals_response(request, project, proposal.case,
                               notice=f"Replay {replay.pk} started ({replay.pairs} pairs).")


@login_required
def replay_detail(request, slug: str, replay_id: int):
    """htmx poll of one replay: its job's progress, then the 2x2 table and statistics (and the grade, oob)."""
    project, _ = project_for(request.user, slug, CAN_CURATE)
    replay = selectors.replay_for(request.user, replay_id)
    case = replay.proposal.case
    if case.trace.project_id != project.pk:
        raise Http404("No such replay.")
    view = _replay_view(project, replay, replay.job)
    context = {"project": project, "r": view}
    if replay.job is None or replay.job.is_terminal:
        context |= {"refresh": True, **_extras(project, case)}
    return render(request, "corpora/aed/_replay_swap.html", context)


# --- dashboard -------------------------------------------------------------------------------------

@login_required
def dashboard(request, slug: str):
    project, _ = project_for(request.user, slug, CAN_CURATE)
    summary = selectors.corpus_summary(project)
    names = {c["slug"]: c["name"] for c in shipped_error_taxonomy().categories}
    grades = summary["grades"]
    ci = summary["mean_gain_ci"]
    return render(request, "corpora/aed/dashboard.html", {
        "project": project,
        "summary": summary,
        "mean_gain": _signed(summary["mean_gain"]),
        "mean_gain_ci": f"[{_signed(ci[0])}, {_signed(ci[1])}]" if ci else "",
        "pass_rate_c": _percent(summary["pass_rate"]["C"]),
        "pass_rate_r": _percent(summary["pass_rate"]["R"]),
        "grade_rows": [{"grade": g, "n": n, "rule": GRADE_TEXT.get(g, "No rule applies yet.")}
                       for g, n in grades.items()],
        "category_rows": [{"slug": slug_, "name": names.get(slug_, ""), "n": n}
                          for slug_, n in summary["categories"].items()],
        "breakdowns": [{"field": field.replace("_", " "), "rows": [
            {"name": name, **row, "mean_gain": _signed(row["mean_gain"])} for name, row in groups.items()]}
            for field, groups in summary["breakdowns"].items()],
        "grade_rules": stats.GRADE_RULES,
        "grade_chart": bar_chart(list(grades), list(grades.values()), title="Cases by grade"),
        "category_chart": bar_chart(list(summary["categories"]), list(summary["categories"].values()),
                                    title="Cases by error category"),
        "arm_chart": bar_chart(["C (corrected)", "R (retry)"],
                               [summary["pass_rate"]["C"], summary["pass_rate"]["R"]],
                               title="Pooled pass rate by arm", value_format=lambda v: f"{v:.0%}"),
    })
