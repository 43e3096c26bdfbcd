"""What every AED kind exports: the project's submitted cases up to the data version, filtered, graded as
of that version, a page at a time; and the fields every kind registers with."""

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from django.db.models import BooleanField, Count, Max, Q, QuerySet, Subquery, Value, When
from django.db.models import Case as SqlCase
from django.utils.translation import gettext_lazy, gettext_noop
from rest_framework import serializers

from dataplatform.accounts.models import Project
from dataplatform.exports.registry import ExportFilters, ExportQuery
from dataplatform.exports.sources import keyset_pages

from .. import selectors, stats
from ..models import Case, CaseStatus, Proposal, Replay, ReplayMode, ReplayRun

# A page of cases carries their traces' steps; keep pages small whatever the export's batch size.
CASE_PAGE = 200
# Which evidence a case needs to be exported (the `evidence` filter), from the strictest.
REPLAYED, CHECKED, ANY = "replayed", "checked", "any"
EVIDENCE_CHOICES = [REPLAYED, CHECKED, ANY]
# The defaults do what the AED paper's corpus did: 50,228 diagnosis pairs, of which 3,062 were replayed. Diagnosis
# data does not wait for a replay: every submitted case is exported with its grade as it stands (a replay's A or B,
# the evidence check's C, or none yet), so a trainer filters on the `grade` column, or asks for `evidence=replayed`.
# A case graded D is left out unless asked for (min_grade=D): its own evidence contradicts or fails to support the
# diagnosis, or its replay showed the correction gains nothing, and the paper's corpus keeps what was not shown wrong.
DEFAULT_EVIDENCE = ANY
DEFAULT_MIN_GRADE = "C"


# --- data version and filters -------------------------------------------------------------------------

@dataclass(frozen=True)
class Bound:
    """The highest case id and replay-run id an export reads."""

    cases: int
    runs: int

    @classmethod
    def parse(cls, data_version: str) -> "Bound":
        parts = [int(part) for part in (data_version or "0:0").split(":")]
        return cls(*(parts + [0, 0])[:2])


def data_version(project: Project) -> str:
    cases = Case.objects.filter(trace__project=project).aggregate(top=Max("id"))["top"] or 0
    runs = ReplayRun.objects.filter(replay__proposal__case__trace__project=project).aggregate(top=Max("id"))["top"]
    return f"{cases}:{runs or 0}"


class AedFilters(ExportFilters):
    """Filters on submitted cases; `created_*` bound when the case was opened."""

    evidence = serializers.ChoiceField(
        choices=EVIDENCE_CHOICES, default=DEFAULT_EVIDENCE,
        help_text=gettext_lazy("the evidence a case needs: replayed (a replay grades it), checked (a replay or the "
                               "curator's evidence check), any (ungraded cases too: diagnosis data does not wait for "
                               "a replay)"))
    min_grade = serializers.ChoiceField(
        choices=stats.GRADE_ORDER, default=DEFAULT_MIN_GRADE,
        help_text=gettext_lazy("the lowest evidence grade exported among graded cases (A best; D, a diagnosis its "
                               "evidence does not support or a correction without gain, only when asked for)"))
    category = serializers.ListField(child=serializers.CharField(), required=False,
                                     help_text=gettext_lazy("error category slugs"))
    environment = serializers.ListField(child=serializers.CharField(), required=False)
    harness = serializers.ListField(child=serializers.CharField(), required=False)
    policy_model = serializers.ListField(child=serializers.CharField(), required=False)


def _cases(query: ExportQuery, cases: QuerySet[Case] | None = None) -> QuerySet[Case]:
    """The project's submitted cases up to the data version, filtered (grades are checked per page)."""
    bound = Bound.parse(query.data_version)
    cases = selectors.cases_of(query.project) if cases is None else cases
    cases = cases.filter(trace__project=query.project, status=CaseStatus.SUBMITTED, id__lte=bound.cases)
    filters = query.filters
    if filters.get("category"):
        cases = cases.filter(category__in=list(filters["category"]))
    for name in ("environment", "harness", "policy_model"):
        if filters.get(name):
            cases = cases.filter(**{f"trace__{name}__in": list(filters[name])})
    if filters.get("created_after"):
        cases = cases.filter(created_at__gte=filters["created_after"])
    if filters.get("created_before"):
        cases = cases.filter(created_at__lt=filters["created_before"])
    return cases


def _count(query: ExportQuery) -> int:
    """Submitted cases that pass the filters other than the grade: an upper bound for the progress bar."""
    return _cases(query).count()


# Every kind registers with these, so they export the same cases under the same data version, and splits them by
# task: a case on another trace of the same task (another policy, another attempt) is never on the other side.
COMMON = {"data_version": data_version, "filters": AedFilters, "count": _count, "group": "task",
          "group_by": ("task_id", "trace_id"),
          "not_append_only": gettext_noop(
              "a submitted case can still be edited (error step, category, diagnosis), a proposal accepted or "
              "rejected and a replay's run retried in place, and grades follow the project's current grading.")}


# --- graded cases, a page at a time --------------------------------------------------------------------

@dataclass(frozen=True)
class Graded:
    case: Case
    grade: str | None  # None: neither replayed nor evidence-checked yet
    proposal: Proposal | None  # the proposal that grades the case (selectors.evidence_of)
    replay: Replay | None  # its replay, with the table and statistics of the runs up to the data version


def _bound_replays(page: list[Case], run_bound: int, alpha: float) -> None:
    """Give every prefetched replay of the page the table and statistics of its runs up to `run_bound`.
    In memory only (nothing is saved): the selectors then grade each case as of the data version."""
    replays = {replay.pk: replay for case in page for proposal in case.proposals.all()
               for replay in proposal.replays.all() if replay.mode == ReplayMode.PAIRED}
    runs: dict[int, list[tuple[int, str, bool]]] = {pk: [] for pk in replays}
    for replay_id, pair, arm, passed in (ReplayRun.objects.filter(replay_id__in=list(replays), id__lte=run_bound)
                                         .values_list("replay_id", "pair", "arm", "passed")):
        runs[replay_id].append((pair, arm, passed))
    for pk, replay in replays.items():
        replay.n11, replay.n10, replay.n01, replay.n00 = stats.table_from_runs(runs[pk])
        replay.stats = stats.replay_stats(replay.n11, replay.n10, replay.n01, replay.n00, alpha=alpha)


def leave_out(query: ExportQuery, reason: str) -> None:
    """Count a case the filters matched but the rows leave out, under its reason: the engine writes the counts into
    the manifest and the dataset card (`left_out`), so an export says how many it left out and why."""
    left_out = query.notes.setdefault("left_out", {})
    left_out[reason] = left_out.get(reason, 0) + 1


def _reason_to_leave_out(grade: str | None, basis: str | None, filters: dict) -> str | None:
    evidence = filters.get("evidence") or DEFAULT_EVIDENCE
    minimum = filters.get("min_grade") or DEFAULT_MIN_GRADE
    if basis is None and evidence != ANY:
        return f"ungraded: neither replayed nor evidence-checked (evidence={evidence})"
    if basis == stats.CHECK and evidence == REPLAYED:
        return f"graded {grade} by the evidence check, not replayed (evidence={REPLAYED})"
    if grade is not None and not stats.grade_at_least(grade, minimum):
        return f"grade {grade}, below min_grade {minimum}"
    return None


def graded_pages(query: ExportQuery, *, with_steps: bool = True) -> Iterator[list[Graded]]:
    """Submitted cases that pass the filters, with the evidence the `evidence` filter asks for and graded at least
    `min_grade` (ungraded ones when it asks for any), a page at a time (keyset on id); the others are counted,
    each with its reason (`leave_out`)."""
    bound = Bound.parse(query.data_version)
    cases = _cases(query) if with_steps else _cases(query).defer("trace__steps")
    grading = selectors.grading_of(query.project)
    query.notes["grading"] = grading.describe()
    for page in keyset_pages(cases, batch_size=max(1, min(CASE_PAGE, query.batch_size))):
        _bound_replays(page, bound.runs, grading.alpha)
        graded = []
        for case in page:
            proposal, replay = selectors.evidence_of(case, grading)
            replay_stats = replay.stats if replay else None
            grade = stats.grade(case.evidence_check, replay_stats, grading)
            reason = _reason_to_leave_out(grade, stats.basis(case.evidence_check, replay_stats), query.filters)
            if reason:
                leave_out(query, reason)
            else:
                graded.append(Graded(case, grade, proposal, replay))
        yield graded


# --- columns every kind has ------------------------------------------------------------------------------

def row_key(case: Case) -> str:
    return f"case-{case.pk}"


# What the columns several kinds share mean (their dataset cards' Fields tables); a kind takes its own
# (`case_meanings`).
CASE_MEANINGS = {
    "id": 'The row\'s key, "case-<case id>", the same in every AED kind.',
    "task_id": "The task the traced agent attempted (as imported; empty when unknown). The split's group: the cases "
               "of one task, on any trace and in every AED kind, are all in the same split (a trace of no known task "
               "is a group of its own, by trace_id).",
    "case_id": "The case: one curator's diagnosis of one trace.",
    "trace_id": "The trace's id as imported: the agent's run the case diagnoses.",
    "environment": "The environment the traced agent ran in (as imported; empty when unknown).",
    "harness": "The agent harness of the traced run (as imported; empty when unknown).",
    "policy_model": "The model that acted as the traced agent (as imported; empty when unknown).",
    "error_step": "0-based index into the trace's steps of the first decisive error.",
    "category": "The error category's slug, from the case's error taxonomy.",
    "diagnosis": "The diagnosis: what goes wrong at the error step and why.",
    "evidence_json": 'What the diagnosis rests on, as JSON: [{"step": <step index>, "quote"?: "<text>"}].',
    "evidence_check": "The curator's check of the diagnosis against its evidence: unchecked, supported, "
                      "unsupported or contradicted.",
    "taxonomy": "The name of the error taxonomy the category comes from.",
    "taxonomy_version": "The version of that taxonomy.",
    "grade": "The case's evidence grade as of the data version, by the project's grading rules: A or B from a "
             "replay, C from the curator's evidence check alone (supported, not replayed), D (unsupported, "
             "contradicted, or no gain in replay); null when the case is neither replayed nor evidence-checked. "
             "The export's evidence and min_grade filters say which grades it holds.",
}


def case_meanings(*names: str) -> dict[str, str]:
    return {name: CASE_MEANINGS[name] for name in names}


# Every kind says which retry its evidence was measured against: arm R's design in the replay that grades the
# case (RetryDesign: resample or original), null when the case was not replayed.
RETRY_ARM = ("retry_arm", pa.string())
RETRY_ARM_MEANING = {"retry_arm": "Arm R's design in the replay that grades the case: resample (the policy samples "
                                  "the error step again) or original (the original step runs again); null when the "
                                  "case was not replayed."}


def retry_arm(graded: Graded) -> dict:
    return {"retry_arm": graded.replay.retry if graded.replay is not None else None}


# Who diagnosed, and both evidence checks: the curator's `evidence_check` (which the kinds already carry) and the
# model's verdict beside it, so a trainer can keep only human diagnoses or only confirmed checks.
WHO_COLUMNS = [("diagnosed_by", pa.string()), ("diagnosis_model_id", pa.string()),
               ("diagnosis_prompt_version", pa.string()), ("model_evidence_check", pa.string()),
               ("model_evidence_rationale", pa.string()), ("model_evidence_model_id", pa.string())]
WHO_MEANINGS = {
    "diagnosed_by": "Who made the diagnosis as it stands (error step, category, diagnosis): model or curator.",
    "diagnosis_model_id": "The model that drafted the diagnosis; null when the curator made it.",
    "diagnosis_prompt_version": "The version of the drafting prompt the model was given; null when the curator "
                                "made the diagnosis.",
    "model_evidence_check": "A model's check of the diagnosis against its evidence (supported, unsupported or "
                            "contradicted), beside the curator's evidence_check; null when no model checked it.",
    "model_evidence_rationale": "The model's reason for its evidence check; null when no model checked it.",
    "model_evidence_model_id": "The model that made that evidence check; null when none did.",
}


def who_columns(case: Case) -> dict:
    return {name: getattr(case, name) or None for name, _ in WHO_COLUMNS}


TRACE_MEANINGS = case_meanings("trace_id", "task_id", "environment", "harness", "policy_model")  # trace_columns'


def trace_columns(case: Case) -> dict:
    trace = case.trace
    return {"trace_id": trace.trace_id, "task_id": trace.task_id, "environment": trace.environment,
            "harness": trace.harness, "policy_model": trace.policy_model}


# --- kept grades, for the stored kinds ----------------------------------------------------------------------
# A stored kind's rows are derived once; which cases an export holds (the grade filters), how many it leaves out, by
# reason, and the grade columns of its rows are read from the grades kept on the cases (`grades.regrade`: the rules of
# `stats.grade` on the replay `selectors.evidence_of` picks, kept by every service that moves them).

GRADE, BASIS = "grade", "grade_basis"


def _admitted(filters: dict) -> Q:
    """The grades and bases the `evidence` and `min_grade` filters let through (`_reason_to_leave_out`'s rules)."""
    evidence = filters.get("evidence") or DEFAULT_EVIDENCE
    minimum = filters.get("min_grade") or DEFAULT_MIN_GRADE
    grades = Q(**{f"{GRADE}__in": stats.GRADE_ORDER[:stats.GRADE_ORDER.index(minimum) + 1]})
    admitted = grades | Q(**{f"{GRADE}__isnull": True}) if evidence == ANY else grades
    if evidence == REPLAYED:
        admitted &= Q(**{BASIS: stats.REPLAY})
    return admitted


def selected_cases(query: ExportQuery) -> QuerySet[Case]:
    """The submitted cases an export of a stored kind holds: the filters', by their kept grades."""
    return _cases(query, Case.objects.all()).filter(_admitted(query.filters))


def note_grades_left_out(query: ExportQuery, **admitted_by) -> dict[tuple, int]:
    """Count the cases the filters match but the grade filters leave out, by reason (`leave_out`), in SQL; and
    record the grading rules, as `graded_pages` does. Returns the cases let through, counted by the values of the
    `admitted_by` annotations (a tuple of them; () without any), in the same query."""
    query.notes["grading"] = selectors.grading_of(query.project).describe()
    # A CASE, not exclude(): a null grade or basis makes the negated condition null, which would drop the ungraded cases.
    graded = _cases(query, Case.objects.all()).annotate(aed_admitted=SqlCase(
        When(_admitted(query.filters), then=Value(True)), default=Value(False), output_field=BooleanField()),
        **admitted_by)
    admitted: dict[tuple, int] = {}
    for grade, basis, let_through, *by, count in graded.order_by().values_list(
            GRADE, BASIS, "aed_admitted", *admitted_by).annotate(count=Count("id")):
        if let_through:
            admitted[tuple(by)] = admitted.get(tuple(by), 0) + count
            continue
        reason = _reason_to_leave_out(grade, basis, query.filters)
        left_out = query.notes.setdefault("left_out", {})
        left_out[reason] = left_out.get(reason, 0) + count
    return admitted


# The columns of a stored kind read at export time: what grades the case changes in place (a replay's new runs, a
# proposal rejected, the evidence check, the project's grading rules).
GRADE_COLUMNS = ("grade", "retry_arm")


def live_grade_columns(query: ExportQuery, case) -> dict:
    """The GRADE_COLUMNS of a case, kept on it: `case` is an OuterRef to its id, or a queryset of that one case
    (found through the source)."""
    cases = case if isinstance(case, QuerySet) else Case.objects.filter(pk=case)
    return {"grade": Subquery(cases.values(GRADE)[:1]), "retry_arm": Subquery(cases.values("grade_replay__retry")[:1])}


def graded_by_ids(project: Project, case_ids: list[int], *, with_steps: bool = True) -> list[Graded]:
    """The cases `case_ids` of the project (one page: a stored kind's derivation), graded as they stand."""
    cases = selectors.cases_of(project).filter(pk__in=case_ids).order_by("pk")
    page = list(cases if with_steps else cases.defer("trace__steps"))
    grading = selectors.grading_of(project)
    _bound_replays(page, ALL_RUNS, grading.alpha)
    graded = []
    for case in page:
        proposal, replay = selectors.evidence_of(case, grading)
        graded.append(Graded(case, stats.grade(case.evidence_check, replay.stats if replay else None, grading),
                             proposal, replay))
    return graded


ALL_RUNS = 2 ** 62  # a run bound above every run: the replays as they stand
