"""Reads of the AED workflow. Curation is curators' and admins' work: the selectors take the user
and return nothing for anyone else (trainers read the exports, not the cases)."""

import math

from django.db.models import Prefetch, QuerySet
from django.http import Http404

from dataplatform.accounts.models import ApiToken, Project
from dataplatform.accounts.permissions import CAN_CURATE, visible_projects
from dataplatform.tallies.registry import Figure
from dataplatform.tallies.selectors import figures as tally_figures

from . import grades, stats
from .models import Case, CaseStatus, Proposal, ProposalStatus, Replay, Trace


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
    return grades.grading_of_id(project.pk)


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
    error categories, and breakdowns by environment, harness and policy model: read from the project's kept
    figures (`grades.CASES`), a few rows at any size."""
    figures = tally_figures(project.pk, grades.CASES)

    def figure(key: str) -> Figure:
        return figures.get(key, Figure(0))

    grading = grading_of(project)
    replayed, squares = figure("replayed"), figure("replayed.squares")
    mean = replayed.total / replayed.count if replayed.count else None
    half = None
    if replayed.count > 1:  # the sample variance from the sums (never below 0 for rounding)
        variance = max(0.0, (squares.total - replayed.total ** 2 / replayed.count) / (replayed.count - 1))
        half = 1.96 * math.sqrt(variance) / math.sqrt(replayed.count)
    grade_counts = {g: figure(f"grade|{g}").count for g in [*stats.GRADE_ORDER, grades.UNGRADED]}
    categories = sorted(((key.split("|", 1)[1], f.count) for key, f in figures.items()
                         if key.startswith("category|") and f.count), key=lambda item: (-item[1], item[0]))
    breakdowns = {}
    for field in grades.BREAKDOWN_FIELDS:
        groups = {}
        for key, f in sorted(figures.items()):
            if not key.startswith(f"{field}|") or not f.count:
                continue
            name = key.split("|", 1)[1]
            gained = figure(f"{field}.replayed|{name}").count
            groups[name] = {"cases": f.count, "graded_a_or_b": figure(f"{field}.ab|{name}").count,
                            "mean_gain": f.total / gained if gained else None}
        breakdowns[field] = groups
    return {
        "grading": grading.describe(),
        "cases": sum(grade_counts.values()),
        "grades": grade_counts,
        "mean_gain": mean,
        "mean_gain_ci": [mean - half, mean + half] if half is not None else None,
        "replayed": replayed.count,
        "pass_rate": {arm: (figure(f"arm|{arm}").total / figure(f"arm|{arm}").count if figure(f"arm|{arm}").count
                            else None) for arm in ("C", "R")},
        "categories": dict(categories),
        "breakdowns": breakdowns,
    }


def case_counts(project: Project) -> dict[str, int]:
    """The project's cases in all and by status (kept figures)."""
    figures = tally_figures(project.pk, grades.CASES)
    statuses = {key.split("|", 1)[1]: f.count for key, f in figures.items() if key.startswith("status|")}
    return {"cases": sum(statuses.values()), **{status: statuses.get(status, 0) for status in CaseStatus.values}}


def trace_figures(project: Project) -> dict[str, Figure]:
    """The project's traces in all ("traces") and by environment, harness and policy model ("<field>|<value>")."""
    return tally_figures(project.pk, grades.TRACES)
