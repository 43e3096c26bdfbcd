"""The parts of the trace page that several endpoints render again (the case form, the draft box, the
proposals with their replays, the grade and the history), and the checks every endpoint of one case
or proposal starts with: the requesting curator's own, else 404."""

import json

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext, gettext_lazy

from dataplatform.accounts.permissions import CAN_CURATE, project_for
from dataplatform.jobs.models import Job
from dataplatform.jobs.views import stalled_reason
from dataplatform.status import render_html

from .. import runners, selectors, stats
from ..inputs import MAX_REPLAY_PAIRS, MAX_REPLAY_STEPS, REPLAY_DEFAULTS
from ..models import EvidenceCheck, ReplayMode, RetryDesign

MODEL_JOB_KINDS = ("aed.draft", "aed.check_evidence")  # what the case's model box starts and follows
NO_RULE = gettext_lazy("No rule applies yet: check the evidence or replay a proposal.")
# Arm R's design in a replay's head line, short ("arm R: original"); the choices' labels say it in full.
RETRY_NAMES = {"resample": gettext_lazy("resample"), "original": gettext_lazy("original")}
# What the history calls each kind of event (services write the kinds; an unknown one is shown as it is).
EVENT_KINDS = {
    "open": gettext_lazy("opened"),
    "edit": gettext_lazy("edited"),
    "submit": gettext_lazy("submitted"),
    "propose": gettext_lazy("proposed a correction"),
    "proposal_status": gettext_lazy("proposal status"),
    "replay": gettext_lazy("replay started"),
    "draft_failed": gettext_lazy("draft failed"),
    "model_check": gettext_lazy("evidence checked"),
    "model_check_failed": gettext_lazy("evidence check failed"),
}


# --- whose case ------------------------------------------------------------------------------------

def own_case(request, slug: str, case_id: int):
    """The project and the requesting curator's own case (anyone else's: 404)."""
    project, _ = project_for(request.user, slug, CAN_CURATE)
    case = selectors.case_for(request.user, case_id)
    if case.trace.project_id != project.pk or case.curator_id != request.user.pk:
        raise Http404("No such case.")
    return project, case


def own_proposal(request, slug: str, proposal_id: int):
    project, _ = project_for(request.user, slug, CAN_CURATE)
    proposal = selectors.proposal_for(request.user, proposal_id)
    if proposal.case.trace.project_id != project.pk or proposal.case.curator_id != request.user.pk:
        raise Http404("No such proposal.")
    return project, proposal


# --- answers -----------------------------------------------------------------------------------------

def is_htmx(request) -> bool:
    return request.headers.get("HX-Request") == "true"


def back_to_trace(request, project, case, *, error: str = "", notice: str = ""):
    """The answer without htmx: the trace page again, with the message."""
    if error:
        messages.error(request, error)
    elif notice:
        messages.success(request, notice)
    return redirect("aed-trace", slug=project.slug, trace_id=case.trace_id)


# --- the grading rules, in the page's language --------------------------------------------------------
# `stats.Grading` words them in English for the API and the exports; these say the same in the page's language.

def grade_rules(grading: stats.Grading) -> list[tuple[str, str]]:
    """`grading.rules()` in the page's language (the same text in English)."""
    share = f"{stats.DOUBLE_PASS_HIGH:.0%}"
    return [
        ("A", gettext("Replayed with at least %(pairs)s pairs: the correction beats the retry significantly (exact "
                      "McNemar p < %(alpha)s), and in fewer than %(share)s of the pairs where the correction passes "
                      "does the retry pass too.") % {"pairs": grading.min_pairs, "alpha": f"{grading.alpha:g}",
                                                     "share": share}),
        ("B", gettext("Replayed with a positive net gain, but not significant, too few pairs, or the retry also "
                      "passes in at least %(share)s of the pairs where the correction passes.") % {"share": share}),
        ("C", gettext("Not replayed yet; the evidence check found the diagnosis supported.")),
        ("D", gettext("The evidence is unsupported or contradicted, or the replay shows no net gain over the retry.")),
    ]


def describe_grading(grading: stats.Grading) -> str:
    """`grading.describe()` in the page's language."""
    values = {"alpha": f"{grading.alpha:g}", "pairs": grading.min_pairs}
    if grading.evidence == "first":
        return gettext("graded on the first proposal; A needs p < %(alpha)s with at least %(pairs)s pairs") % values
    return gettext("graded on the best of the proposals; A needs p < %(alpha)s with at least %(pairs)s pairs") % values


def grade_label(grade: str | None) -> str:
    """A grade letter as it is, "ungraded" (or no grade) in the page's language."""
    return grade if grade in stats.GRADE_ORDER else gettext("ungraded")


# --- the parts of the trace page -----------------------------------------------------------------------

def case_context(project, case, *, error: str = "", notice: str = "") -> dict:
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


def draft_context(project, case, *, draft_error: str = "") -> dict:
    job = Job.objects.filter(project=project, kind__in=MODEL_JOB_KINDS, params__case=case.pk).order_by("-id").first()
    reason = job.result.get("reason") if job is not None and isinstance(job.result, dict) else None
    return {"draft_job": job, "draft_error": draft_error, "stalled_reason": stalled_reason(job),
            "draft_reason": render_html(reason, "") if reason else "",  # why the model's last answer was unusable
            "draft_url": reverse("aed-case-draft", args=[project.slug, case.pk]),
            "check_url": reverse("aed-case-check", args=[project.slug, case.pk]),
            "draft_status_url": reverse("aed-case-draft-status", args=[project.slug, case.pk])}


def case_extras(project, case, *, proposal_error: str = "") -> dict:
    """The proposals with their replays, the grade and the history of a case."""
    graded = selectors.cases_of(project).get(pk=case.pk)
    grading = selectors.grading_of(project)
    grade = selectors.grade_of(graded, grading)
    best_proposal, best_replay = selectors.evidence_of(graded, grading)
    proposals = list(graded.proposals.all())
    replays = [replay for proposal in proposals for replay in proposal.replays.all()]
    jobs = Job.objects.in_bulk([r.job_id for r in replays if r.job_id])
    rules = grade_rules(grading)
    return {
        "grade": grade,
        "grade_label": grade_label(grade),
        "grade_text": dict(rules).get(grade, NO_RULE),
        "grade_rules": rules,
        "grading": describe_grading(grading),
        "grade_proposal": best_proposal,
        "grade_replay": best_replay,
        # Why a replay's job waits is left to the replay box's first poll (replay_detail, a second later): asked
        # here, a ping of the workers would hold the page for its whole timeout whenever none is alive.
        "proposals": [{"proposal": p, "replays": [replay_view(project, r, jobs.get(r.job_id), grading.alpha,
                                                              stalled=None)
                                                  for r in p.replays.all()]} for p in proposals],
        "proposal_error": proposal_error,
        "proposal_add_url": reverse("aed-proposal-add", args=[project.slug, case.pk]),
        "runners": list(runners.RUNNERS),
        "retry_designs": RetryDesign.choices,
        "replay_modes": ReplayMode.choices,
        "replay_defaults": REPLAY_DEFAULTS,
        "max_pairs": MAX_REPLAY_PAIRS,
        "max_replay_steps": MAX_REPLAY_STEPS,
        "events": [{"event": e, "kind": EVENT_KINDS.get(e.kind, ""),
                    "payload": json.dumps(e.payload, ensure_ascii=False) if e.payload else ""}
                   for e in case.events.select_related("actor").order_by("id")],
    }


def replay_view(project, replay, job, alpha: float, *, stalled: str | None) -> dict:
    """What the page shows of a replay: its statistics recomputed from the table at the project's `alpha`, and why
    its job waits (`stalled`: read for all the page's jobs at once, `stalled_reasons`)."""
    recovery = replay.mode == ReplayMode.RECOVERY
    s = stats.replay_stats(replay.n11, replay.n10, replay.n01, replay.n00, alpha=alpha) if (
        replay.stats and not recovery) else {}
    return {
        "replay": replay,
        "job": job,
        "stalled_reason": stalled,
        "url": reverse("aed-replay", args=[project.slug, replay.pk]),
        "options": ", ".join(f"{k}={v}" for k, v in sorted(replay.options.items()) if k not in ("url", "headers")),
        "webhook": replay.options.get("url", "") if replay.runner == "webhook" else "",
        "retry_name": RETRY_NAMES.get(replay.retry, replay.retry),
        "has_stats": bool(s.get("pairs")),
        "recovery": recovery,
        "recovery_runs": replay.stats.get("runs", 0) if recovery else 0,
        "recovered": replay.stats.get("recovered", 0) if recovery else 0,
        "recovery_rate": percent(replay.stats.get("recovery_rate")) if recovery else "",
        "pairs_done": s.get("pairs", 0),
        "pass_rate_c": percent(s.get("pass_rate_c")),
        "pass_rate_r": percent(s.get("pass_rate_r")),
        "net_gain": signed(s.get("net_gain")),
        "ci": f"[{signed(s['ci_low'])}, {signed(s['ci_high'])}]" if "ci_low" in s else "",
        "mcnemar_p": f"{s['mcnemar_p']:.3g}" if "mcnemar_p" in s else "",
        "significant": s.get("significant", False),
    }


def percent(value) -> str:
    return "—" if value is None else f"{value:.0%}"


def signed(value) -> str:
    return "—" if value is None else f"{value:+.3f}"
