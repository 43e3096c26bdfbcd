"""Kept grades: each case's grade and what it rests on (the proposal and replay that grade it, that replay's net
gain and 2x2 table) kept on the case, and the project's figures of them (`CASES`, a tally), by the services that can
move them, in their transaction. Pages, the summary API and the exports read the kept columns and figures instead of
grading every case in Python (`selectors.grade_of`, the oracle the tests hold them to) or in SQL on every export.

A service that changes what a grade rests on (the evidence check, a proposal added or judged, a replay's table, the
project's grading rules) or what the figures count (a case opened, its category or status) does

    held = grades.hold([case.pk])   # locks the cases and notes their figures
    ... the change ...
    grades.regrade(held)            # grades them again; the figures move by the difference

in one transaction. The lock makes a concurrent change of the same case wait, so no difference is counted twice."""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from django.db import connection
from django.db.models import Count, F, FloatField, Q, Sum
from django.db.models.functions import Coalesce

from dataplatform.tallies import registry as tallies
from dataplatform.tallies import services as tally_services
from dataplatform.tallies.registry import Figure

from . import stats
from .models import AedSettings, Case, Proposal, ProposalStatus, Replay, Trace

UNGRADED = "ungraded"
NONE = "(none)"  # a trace field left empty, as the summary's breakdowns name it
BREAKDOWN_FIELDS = ("environment", "harness", "policy_model")
KEPT_FIELDS = ("grade", "grade_basis", "grade_proposal_id", "grade_replay_id", "grade_net_gain",
               "grade_n11", "grade_n10", "grade_n01", "grade_n00")


@dataclass(frozen=True)
class Kept:
    """A case's kept grade columns (KEPT_FIELDS, in order)."""

    grade: str | None = None
    grade_basis: str | None = None
    grade_proposal_id: int | None = None
    grade_replay_id: int | None = None
    grade_net_gain: float | None = None
    grade_n11: int = 0
    grade_n10: int = 0
    grade_n01: int = 0
    grade_n00: int = 0


def evidence(proposals: list[tuple[int, str]], replays: dict[int, list[tuple[int, dict, tuple]]],
             grading: stats.Grading) -> tuple[int | None, tuple[int, dict, tuple] | None]:
    """`selectors.evidence_of` on plain rows: `proposals` [(id, status)] in id order, `replays` {proposal id:
    [(replay id, stats, (n11, n10, n01, n00))], newest first}. Returns (proposal id, replay row or None)."""
    best: tuple[int | None, tuple | None] = (None, None)
    for proposal_id, status in proposals:
        if status == ProposalStatus.REJECTED:
            continue
        replay = next((row for row in replays.get(proposal_id, ()) if row[1].get("pairs")), None)
        if grading.evidence == "first":
            return proposal_id, replay
        if replay is None:
            best = best if best[0] else (proposal_id, None)
            continue
        if best[1] is None or replay[1]["net_gain"] > best[1][1]["net_gain"]:
            best = (proposal_id, replay)
    return best


def kept_of(evidence_check: str, proposal_id: int | None, replay, grading: stats.Grading) -> Kept:
    replay_stats = replay[1] if replay else None
    return Kept(grade=stats.grade(evidence_check, replay_stats, grading),
                grade_basis=stats.basis(evidence_check, replay_stats), grade_proposal_id=proposal_id,
                grade_replay_id=replay[0] if replay else None,
                grade_net_gain=replay_stats["net_gain"] if replay else None,
                **dict(zip(("grade_n11", "grade_n10", "grade_n01", "grade_n00"), replay[2] if replay else (0,) * 4,
                           strict=True)))


def graded(case_ids: list[int], grading: stats.Grading) -> dict[int, Kept]:
    """The cases' grades as they stand, from their proposals and replays (three queries)."""
    proposals: dict[int, list[tuple[int, str]]] = {pk: [] for pk in case_ids}
    for pk, case_id, status in (Proposal.objects.filter(case_id__in=case_ids).order_by("id")
                                .values_list("pk", "case_id", "status")):
        proposals[case_id].append((pk, status))
    replays: dict[int, list] = {}
    for pk, proposal_id, replay_stats, *table in (
            Replay.objects.filter(proposal__case_id__in=case_ids).order_by("-id")
            .values_list("pk", "proposal_id", "stats", "n11", "n10", "n01", "n00")):
        replays.setdefault(proposal_id, []).append((pk, replay_stats or {}, tuple(table)))
    checks = dict(Case.objects.filter(pk__in=case_ids).values_list("pk", "evidence_check"))
    return {pk: kept_of(checks[pk], *evidence(proposals[pk], replays, grading), grading) for pk in case_ids}


def grading_of_id(project_id: int) -> stats.Grading:
    """The project's grading rules (the defaults until a curator changes them)."""
    found = AedSettings.objects.filter(project_id=project_id).first()
    return found.grading() if found is not None else stats.DEFAULT_GRADING


# --- the project's figures -------------------------------------------------------------------------------

def _figures(*, grade, category, status, environment, harness, policy_model, cases=1, replayed=0, gain=0.0,
             squares=0.0, pairs=0, c_passes=0, r_passes=0) -> Iterator[tuple[str, Figure]]:
    """What `cases` cases alike add to the figures (one case, or a group of the recount)."""
    yield f"grade|{grade or UNGRADED}", Figure(cases)
    yield f"status|{status}", Figure(cases)
    if category:
        yield f"category|{category}", Figure(cases)
    for field, value in zip(BREAKDOWN_FIELDS, (environment, harness, policy_model), strict=True):
        value = value or NONE
        yield f"{field}|{value}", Figure(cases, gain)
        yield f"{field}.replayed|{value}", Figure(replayed)
        yield f"{field}.ab|{value}", Figure(cases if grade in ("A", "B") else 0)
    yield "replayed", Figure(replayed, gain)
    yield "replayed.squares", Figure(replayed, squares)
    yield "arm|C", Figure(pairs, c_passes)
    yield "arm|R", Figure(pairs, r_passes)


def _case_figures(row: dict) -> Iterator[tuple[str, Figure]]:
    """One case's figures, from its kept columns (`_FIGURE_COLUMNS`)."""
    gain = row["grade_net_gain"]
    n11, n10, n01, n00 = row["grade_n11"], row["grade_n10"], row["grade_n01"], row["grade_n00"]
    return _figures(grade=row["grade"], category=row["category"], status=row["status"],
                    environment=row["trace__environment"], harness=row["trace__harness"],
                    policy_model=row["trace__policy_model"], replayed=int(row["grade_replay_id"] is not None),
                    gain=gain or 0.0, squares=(gain or 0.0) ** 2, pairs=n11 + n10 + n01 + n00,
                    c_passes=n11 + n10, r_passes=n11 + n01)


def _add_up(figures: Iterable[tuple[str, Figure]], into: dict[str, Figure], sign: int = 1) -> dict[str, Figure]:
    for key, figure in figures:
        count, total = into.get(key, Figure(0))
        into[key] = Figure(count + sign * figure.count, total + sign * figure.total)
    return into


def recount(project_id: int) -> dict[str, Figure]:
    """The project's case figures from scratch: one grouped query over the kept columns."""
    gain = Coalesce(F("grade_net_gain"), 0.0, output_field=FloatField())
    groups = (Case.objects.filter(trace__project_id=project_id).order_by()
              .values("grade", "category", "status", "trace__environment", "trace__harness", "trace__policy_model")
              .annotate(cases=Count("id"), replayed=Count("id", filter=Q(grade_replay__isnull=False)),
                        gain=Sum(gain), squares=Sum(gain * gain),
                        pairs=Sum(F("grade_n11") + F("grade_n10") + F("grade_n01") + F("grade_n00")),
                        c_passes=Sum(F("grade_n11") + F("grade_n10")), r_passes=Sum(F("grade_n11") + F("grade_n01"))))
    figures: dict[str, Figure] = {}
    for group in groups:
        _add_up(_figures(grade=group["grade"], category=group["category"], status=group["status"],
                         environment=group["trace__environment"], harness=group["trace__harness"],
                         policy_model=group["trace__policy_model"], cases=group["cases"], replayed=group["replayed"],
                         gain=group["gain"] or 0.0, squares=group["squares"] or 0.0, pairs=group["pairs"] or 0,
                         c_passes=group["c_passes"] or 0, r_passes=group["r_passes"] or 0), figures)
    return {key: figure for key, figure in figures.items() if figure.count}


CASES = tallies.define("aed.cases", tables=(Case,), recount=recount)


def recount_traces(project_id: int) -> dict[str, Figure]:
    """The project's traces, in all and by environment, harness and policy model (the traces list's filters)."""
    figures = {"traces": Figure(Trace.objects.filter(project_id=project_id).count())}
    for field in BREAKDOWN_FIELDS:
        for value, n in (Trace.objects.filter(project_id=project_id).order_by().values_list(field)
                         .annotate(n=Count("id"))):
            figures[f"{field}|{value}"] = Figure(n)
    return {key: figure for key, figure in figures.items() if figure.count}


TRACES = tallies.define("aed.traces", tables=(Trace,), recount=recount_traces)


def count_traces(project_id: int, traces: Iterable[dict]) -> None:
    """Count newly written traces (the importer's, in its transaction)."""
    changes: dict[str, Figure] = {}
    for trace in traces:
        _add_up([("traces", Figure(1)), *((f"{field}|{trace.get(field) or ''}", Figure(1))
                                          for field in BREAKDOWN_FIELDS)], changes)
    tally_services.add(project_id, TRACES, changes)


# --- hold and regrade ------------------------------------------------------------------------------------------

_FIGURE_COLUMNS = ("pk", "category", "status", "trace__project_id", "trace__environment", "trace__harness",
                   "trace__policy_model", *KEPT_FIELDS)


@dataclass
class Held:
    """Cases locked for a change, with their figures before it."""

    rows: dict[int, dict]
    new: bool = False  # cases just created: not counted yet


def hold(case_ids: Iterable[int], *, new: bool = False) -> Held:
    """Lock the cases (in id order; FOR NO KEY UPDATE, which a proposal or an event inserted beside them does not
    wait for) and note their kept columns, to count the difference `regrade` makes; `new` cases, just created, are
    not counted yet."""
    ids = sorted(set(case_ids))
    locked = Case.objects.filter(pk__in=ids).order_by("pk")
    if connection.features.has_select_for_update:
        locked = locked.select_for_update(no_key=connection.features.has_select_for_no_key_update, of=("self",))
    return Held({row["pk"]: row for row in locked.values(*_FIGURE_COLUMNS)}, new)


def regrade(held: Held, grading: stats.Grading | None = None) -> int:
    """Grade the held cases again as they stand now, write the kept columns that changed and move the project's
    figures by the difference (a category or a status changed since `hold` counts too). Returns how many cases'
    grade columns changed."""
    if not held.rows:
        return 0
    ids = list(held.rows)
    if grading is None:
        grading = grading_of_id(next(iter(held.rows.values()))["trace__project_id"])
    kept = graded(ids, grading)
    now = {row["pk"]: row for row in Case.objects.filter(pk__in=ids).values(*_FIGURE_COLUMNS)}
    changed, changes_by_project = [], {}
    for pk, before in held.rows.items():
        after = {**now[pk], **kept[pk].__dict__}
        if any(after[name] != now[pk][name] for name in KEPT_FIELDS):
            changed.append(Case(pk=pk, **kept[pk].__dict__))
        changes = changes_by_project.setdefault(before["trace__project_id"], {})
        _add_up(_case_figures(after), changes if held.new else _add_up(_case_figures(before), changes, sign=-1))
    if changed:
        Case.objects.bulk_update(changed, list(KEPT_FIELDS), batch_size=500)
    for project_id, changes in changes_by_project.items():
        tally_services.add(project_id, CASES, changes)
    return len(changed)


def regrade_cases(case_ids: Iterable[int], grading: stats.Grading | None = None) -> int:
    """hold + regrade, for a change already written (a replay's table) or none (the grading rules)."""
    return regrade(hold(case_ids), grading)
