"""Reads of the AED workflow. Curation is curators' and admins' work: the selectors take the user
and return nothing for anyone else (trainers read the exports, not the cases)."""

import math
import statistics
from collections import Counter, defaultdict

from django.db.models import Prefetch, QuerySet
from django.http import Http404

from dataplatform.accounts.models import ApiToken, Project
from dataplatform.accounts.permissions import CAN_CURATE, visible_projects

from . import stats
from .models import AedSettings, Case, Proposal, ProposalStatus, Replay, Trace


def traces_visible_to(user, project: Project, *, token: ApiToken | None = None) -> QuerySet[Trace]:
    if not visible_projects(user, roles=CAN_CURATE, token=token).filter(pk=project.pk).exists():
        return Trace.objects.none()
    return Trace.objects.filter(project=project)


def trace_for(user, project: Project, trace_id: int, *, token: ApiToken | None = None) -> Trace:
    trace = traces_visible_to(user, project, token=token).filter(pk=trace_id).first()
    if trace is None:
        raise Http404("No such trace.")
    return trace


def cases_of(project: Project) -> QuerySet[Case]:
    """A project's cases with what grading needs: proposals and their replays (callers check the role)."""
    return (Case.objects.filter(trace__project=project).select_related("trace", "curator", "taxonomy")
            .prefetch_related(Prefetch("proposals", queryset=Proposal.objects.prefetch_related(
                Prefetch("replays", queryset=Replay.objects.order_by("-id"))))))


def case_for(user, case_id: int, *, token: ApiToken | None = None) -> Case:
    case = (cases_of_visible(user, token=token).filter(pk=case_id).first())
    if case is None:
        raise Http404("No such case.")
    return case


def cases_of_visible(user, *, token: ApiToken | None = None) -> QuerySet[Case]:
    return (Case.objects.filter(trace__project__in=visible_projects(user, roles=CAN_CURATE, token=token))
            .select_related("trace", "trace__project", "taxonomy", "curator"))


def proposal_for(user, proposal_id: int, *, token: ApiToken | None = None) -> Proposal:
    proposal = (Proposal.objects.filter(pk=proposal_id, case__in=cases_of_visible(user, token=token))
                .select_related("case", "case__trace", "case__trace__project", "case__taxonomy").first())
    if proposal is None:
        raise Http404("No such proposal.")
    return proposal


def replay_for(user, replay_id: int, *, token: ApiToken | None = None) -> Replay:
    replay = (Replay.objects.filter(pk=replay_id, proposal__case__in=cases_of_visible(user, token=token))
              .select_related("proposal", "proposal__case", "job").first())
    if replay is None:
        raise Http404("No such replay.")
    return replay


# --- grading --------------------------------------------------------------------------------------

def grading_of(project: Project) -> stats.Grading:
    """The project's grading rules (the defaults until a curator changes them)."""
    found = AedSettings.objects.filter(project=project).first()
    return found.grading() if found is not None else stats.DEFAULT_GRADING


def evidence_of(case: Case, grading: stats.Grading = stats.DEFAULT_GRADING) -> tuple[Proposal | None, Replay | None]:
    """The proposal and replay that grade the case, among proposals not rejected, each with its latest replay
    with runs: the first proposal (grading.evidence "first", as the paper reports), or the one whose replay has
    the highest net gain ("best")."""
    best = (None, None)
    for proposal in case.proposals.all():  # in id order: the first one first
        if proposal.status == ProposalStatus.REJECTED:
            continue
        replay = next((r for r in proposal.replays.all() if r.stats.get("pairs")), None)
        if grading.evidence == "first":
            return proposal, replay
        if replay is None:
            best = best if best[0] else (proposal, None)
            continue
        if best[1] is None or replay.stats["net_gain"] > best[1].stats["net_gain"]:
            best = (proposal, replay)
    return best


def grade_of(case: Case, grading: stats.Grading = stats.DEFAULT_GRADING) -> str | None:
    _, replay = evidence_of(case, grading)
    return stats.grade(case.evidence_check, replay.stats if replay else None, grading)


# --- dashboard ------------------------------------------------------------------------------------

def corpus_summary(project: Project) -> dict:
    """Grade distribution, mean net gain with a 95% CI over replayed cases, pooled pass rates by arm,
    error categories, and breakdowns by environment, harness and policy model."""
    grades: Counter = Counter()
    categories: Counter = Counter()
    gains: list[float] = []
    arms = {"C": [0, 0], "R": [0, 0]}  # passes, runs
    by = {"environment": defaultdict(list), "harness": defaultdict(list), "policy_model": defaultdict(list)}
    cases = list(cases_of(project))
    grading = grading_of(project)
    for case in cases:
        grade = grade_of(case, grading)
        grades[grade or "ungraded"] += 1
        if case.category:
            categories[case.category] += 1
        _, replay = evidence_of(case, grading)
        gain = replay.stats["net_gain"] if replay else None
        if replay:
            gains.append(gain)
            n = replay.stats["pairs"]
            arms["C"][0] += replay.n11 + replay.n10
            arms["R"][0] += replay.n11 + replay.n01
            arms["C"][1] += n
            arms["R"][1] += n
        for field, groups in by.items():
            groups[getattr(case.trace, field) or "(none)"].append((grade, gain))
    mean = statistics.fmean(gains) if gains else None
    half = 1.96 * statistics.stdev(gains) / math.sqrt(len(gains)) if len(gains) > 1 else None
    return {
        "grading": grading.describe(),
        "cases": len(cases),
        "grades": {g: grades.get(g, 0) for g in [*stats.GRADE_ORDER, "ungraded"]},
        "mean_gain": mean,
        "mean_gain_ci": [mean - half, mean + half] if half is not None else None,
        "replayed": len(gains),
        "pass_rate": {arm: (passes / runs if runs else None) for arm, (passes, runs) in arms.items()},
        "categories": dict(categories.most_common()),
        "breakdowns": {field: {name: {"cases": len(rows), "graded_a_or_b": sum(g in ("A", "B") for g, _ in rows),
                                      "mean_gain": statistics.fmean([x for _, x in rows if x is not None])
                                      if any(x is not None for _, x in rows) else None}
                               for name, rows in sorted(groups.items())}
                       for field, groups in by.items()},
    }
