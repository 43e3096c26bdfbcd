"""Record kinds of the AED corpus: training rows made from curated error cases.

- `aed.diagnosis_sft`: learn to find and diagnose the first decisive error (the run up to and including it
  -> "Error step / Category / Diagnosis").
- `aed.recovery`: AREX-style recovery. The run keeps its error in context (the prefix, the error step and its
  observation), then continues with a passing corrected replay; `loss_mask` is 1 only on the recovery's
  assistant turns.
- `aed.preference`: TRL `prompt` / `chosen` / `rejected`: at the checkpoint before the error step, the
  corrected action is preferred to the original one.
- `aed.pairs`: the full error-diagnosis record with its proposal and the replay evidence (2x2 table, statistics).

Only submitted cases are exported (drafts never), graded at least `min_grade` (B by default; the grades of
`stats.GRADE_RULES`). Every chat row is rendered with the one function `step_messages`, and the context of
the recovery and preference rows with `prefix_messages`, so a preference prompt is byte for byte the start of
the recovery row of the same case. Every kind keys its rows on "case-<id>", so a case falls in the same
train/validation split in every kind.

The data version is "<highest case id>:<highest replay-run id>" of the project. Rows come from cases up to
the first bound; replay evidence (the 2x2 table, its statistics, hence the grade, and the recovery run) from
the runs up to the second, recomputed from those runs rather than read from `Replay.stats`, so a rerun of an
export writes the same evidence however many runs were recorded since. The case's own fields (diagnosis,
status, proposals) are read as they are when the rows are read.

Cases are read a page at a time (keyset on the case id), with their proposals and replays; a page's runs
are read in one query (pair, arm and outcome only; the steps of the recovery run alone).
"""

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from django.db.models import Max, QuerySet
from rest_framework import serializers

from dataplatform.accounts.models import Project
from dataplatform.exports.registry import ExportFilters, ExportKind, ExportQuery, register

from . import selectors, stats
from .models import Case, CaseStatus, Proposal, ProposalStatus, Replay, ReplayRun

MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
# A page of cases carries their traces' steps; keep pages small whatever the export's batch size.
CASE_PAGE = 200
DEFAULT_MIN_GRADE = "B"
DIAGNOSIS_SYSTEM = "You find the first decisive error in an agent's run and diagnose it."


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

    min_grade = serializers.ChoiceField(choices=stats.GRADE_ORDER, default=DEFAULT_MIN_GRADE,
                                        help_text="the lowest evidence grade exported (A best; ungraded never)")
    category = serializers.ListField(child=serializers.CharField(), required=False, help_text="error category slugs")
    environment = serializers.ListField(child=serializers.CharField(), required=False)
    harness = serializers.ListField(child=serializers.CharField(), required=False)
    policy_model = serializers.ListField(child=serializers.CharField(), required=False)


def _cases(query: ExportQuery) -> QuerySet[Case]:
    """The project's submitted cases up to the data version, filtered (grades are checked per page)."""
    bound = Bound.parse(query.data_version)
    cases = selectors.cases_of(query.project).filter(status=CaseStatus.SUBMITTED, id__lte=bound.cases)
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


# --- graded cases, a page at a time --------------------------------------------------------------------

@dataclass(frozen=True)
class Graded:
    case: Case
    grade: str
    proposal: Proposal | None  # the proposal that grades the case (selectors.evidence_of)
    replay: Replay | None  # its replay, with the table and statistics of the runs up to the data version


def _bound_replays(page: list[Case], run_bound: int) -> None:
    """Give every prefetched replay of the page the table and statistics of its runs up to `run_bound`.
    In memory only (nothing is saved): the selectors then grade each case as of the data version."""
    replays = {replay.pk: replay for case in page for proposal in case.proposals.all()
               for replay in proposal.replays.all()}
    runs: dict[int, list[tuple[int, str, bool]]] = {pk: [] for pk in replays}
    for replay_id, pair, arm, passed in (ReplayRun.objects.filter(replay_id__in=list(replays), id__lte=run_bound)
                                         .values_list("replay_id", "pair", "arm", "passed")):
        runs[replay_id].append((pair, arm, passed))
    for pk, replay in replays.items():
        replay.n11, replay.n10, replay.n01, replay.n00 = stats.table_from_runs(runs[pk])
        replay.stats = stats.replay_stats(replay.n11, replay.n10, replay.n01, replay.n00)


def graded_pages(query: ExportQuery, *, with_steps: bool = True) -> Iterator[list[Graded]]:
    """Submitted cases that pass the filters and grade at least `min_grade`, a page at a time (keyset on id)."""
    bound = Bound.parse(query.data_version)
    minimum = query.filters.get("min_grade") or DEFAULT_MIN_GRADE
    cases = _cases(query) if with_steps else _cases(query).defer("trace__steps")
    size = max(1, min(CASE_PAGE, query.batch_size))
    last = 0
    while True:
        page = list(cases.filter(id__gt=last).order_by("id")[:size])
        if not page:
            return
        last = page[-1].pk
        _bound_replays(page, bound.runs)
        graded = []
        for case in page:
            grade = selectors.grade_of(case)
            if stats.grade_at_least(grade, minimum):
                graded.append(Graded(case, grade, *selectors.evidence_of(case)))
        yield graded


# --- rendering: the one way a step becomes chat messages ---------------------------------------------------

def _message(role: str, content: str) -> dict:
    return {"role": role, "content": content}


def _text(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def step_messages(step: dict, *, observation: bool = True) -> list[dict]:
    """A trace step (or a replayed one) as chat messages; every kind renders steps with this function.

    The agent's step (role "assistant", or none) is an assistant message with the step's content, or its
    action when the content is empty. A "system" or "user" step keeps its role; any other role (tool,
    environment, ...) is what the agent observed: a user message "Observation: <content>". The step's
    observation, when it has one, follows as a user message "Observation: <observation>".
    """
    role = step.get("role") or "assistant"
    content = _text(step.get("content"))
    if role == "assistant":
        messages = [_message("assistant", content if content.strip() else _text(step.get("action")))]
    elif role in ("system", "user"):
        messages = [_message(role, content)]
    else:
        messages = [_message("user", f"Observation: {content}")]
    if observation and _text(step.get("observation")):
        messages.append(_message("user", f"Observation: {_text(step['observation'])}"))
    return messages


def task_text(trace) -> str:
    """The task as the rows state it: `meta["task"]` when it is text, else the task id; then the environment."""
    task = (trace.meta or {}).get("task")
    lines = [f"Task: {task if isinstance(task, str) and task.strip() else trace.task_id}"]
    if trace.environment:
        lines.append(f"Environment: {trace.environment}")
    return "\n".join(lines)


def prefix_messages(case: Case) -> list[dict]:
    """The shared context at the checkpoint: the task, then every step before the error step.
    System steps at the very start of the trace stay first (chat templates want the system message first)."""
    steps = [message for step in case.trace.steps[:case.error_step] for message in step_messages(step)]
    lead = 0
    while lead < len(steps) and steps[lead]["role"] == "system":
        lead += 1
    return [*steps[:lead], _message("user", task_text(case.trace)), *steps[lead:]]


def transcript(steps: list[dict]) -> str:
    """Steps as text, one line per rendered message, each with its step's index."""
    return "\n".join(f"[{index}] {message['role']}: {message['content']}"
                     for index, step in enumerate(steps) for message in step_messages(step))


def _key(case: Case) -> str:
    return f"case-{case.pk}"


def _trace_columns(case: Case) -> dict:
    trace = case.trace
    return {"trace_id": trace.trace_id, "environment": trace.environment, "harness": trace.harness,
            "policy_model": trace.policy_model}


# --- aed.diagnosis_sft ----------------------------------------------------------------------------------

DIAGNOSIS_SCHEMA = pa.schema([
    ("id", pa.string()),  # "case-<case id>"
    ("messages", MESSAGES),  # system, user (task + steps up to and including the error step), assistant (diagnosis)
    ("case_id", pa.int64()),
    ("trace_id", pa.string()),
    ("error_step", pa.int64()),
    ("category", pa.string()),
    ("diagnosis", pa.string()),
    ("evidence_json", pa.string()),  # [{"step": i, "quote"?: "..."}]
    ("evidence_check", pa.string()),
    ("grade", pa.string()),
    ("taxonomy", pa.string()),
    ("taxonomy_version", pa.string()),
    ("environment", pa.string()),
    ("harness", pa.string()),
    ("policy_model", pa.string()),
])


def diagnosis_messages(case: Case) -> list[dict]:
    trace, taxonomy = case.trace, case.taxonomy
    question = (f"{task_text(trace)}\n\nSteps:\n{transcript(trace.steps[:case.error_step + 1])}\n\n"
                f"Error categories ({taxonomy.name} v{taxonomy.version}): {', '.join(taxonomy.slugs)}")
    answer = f"Error step: {case.error_step}\nCategory: {case.category}\nDiagnosis: {case.diagnosis}"
    return [_message("system", DIAGNOSIS_SYSTEM), _message("user", question), _message("assistant", answer)]


def diagnosis_rows(query: ExportQuery) -> Iterator[list[dict]]:
    for page in graded_pages(query):
        yield [{
            "id": _key(g.case), "messages": diagnosis_messages(g.case), "case_id": g.case.pk,
            "error_step": g.case.error_step, "category": g.case.category, "diagnosis": g.case.diagnosis,
            "evidence_json": json.dumps(g.case.evidence, sort_keys=True), "evidence_check": g.case.evidence_check,
            "grade": g.grade, "taxonomy": g.case.taxonomy.name, "taxonomy_version": g.case.taxonomy.version,
            **_trace_columns(g.case),
        } for g in page]


# --- aed.recovery -------------------------------------------------------------------------------------------

RECOVERY_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("messages", MESSAGES),  # task, steps before the error, the error step and its observation, the recovery
    ("loss_mask", pa.list_(pa.int64())),  # per message: 1 on the recovery's assistant turns, else 0
    ("case_id", pa.int64()),
    ("trace_id", pa.string()),
    ("error_step", pa.int64()),
    ("category", pa.string()),
    ("grade", pa.string()),
    ("proposal_id", pa.int64()),
    ("corrected_action", pa.string()),
    ("replay_id", pa.int64()),
    ("run_pair", pa.int64()),  # the passing arm-C run the recovery comes from
    ("run_seed", pa.int64()),
    ("environment", pa.string()),
    ("harness", pa.string()),
    ("policy_model", pa.string()),
])


def _first_passing_corrected_runs(replay_ids: list[int], run_bound: int) -> dict[int, ReplayRun]:
    """replay id -> its passing arm-C run of the lowest pair, among the runs up to the bound."""
    first: dict[int, int] = {}
    for replay_id, run_id in (ReplayRun.objects.filter(replay_id__in=replay_ids, arm="C", passed=True,
                                                       id__lte=run_bound)
                              .order_by("replay_id", "pair").values_list("replay_id", "id")):
        first.setdefault(replay_id, run_id)
    return {run.replay_id: run for run in ReplayRun.objects.filter(id__in=list(first.values()))}


def recovery_messages(case: Case, run: ReplayRun) -> tuple[list[dict], list[int]]:
    """(messages, loss_mask): the error stays in context (mask 0), only the recovery's decisions are trained."""
    context = prefix_messages(case) + step_messages(case.trace.steps[case.error_step])
    recovery = [message for step in run.steps if isinstance(step, dict) and step.get("origin") != "prefix"
                for message in step_messages(step)]
    mask = [0] * len(context) + [int(message["role"] == "assistant") for message in recovery]
    return context + recovery, mask


def recovery_rows(query: ExportQuery) -> Iterator[list[dict]]:
    bound = Bound.parse(query.data_version)
    for page in graded_pages(query):
        replayed = [g for g in page if g.replay is not None]
        runs = _first_passing_corrected_runs([g.replay.pk for g in replayed], bound.runs)
        rows = []
        for g in replayed:
            run = runs.get(g.replay.pk)
            if run is None:
                continue
            messages, mask = recovery_messages(g.case, run)
            if not any(mask):  # the run recorded no decision of its own: nothing to train on
                continue
            rows.append({
                "id": _key(g.case), "messages": messages, "loss_mask": mask, "case_id": g.case.pk,
                "error_step": g.case.error_step, "category": g.case.category, "grade": g.grade,
                "proposal_id": g.proposal.pk, "corrected_action": g.proposal.corrected_action,
                "replay_id": g.replay.pk, "run_pair": run.pair, "run_seed": run.seed, **_trace_columns(g.case),
            })
        yield rows


# --- aed.preference ------------------------------------------------------------------------------------------

PREFERENCE_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("prompt", MESSAGES),  # the task and the steps before the error step (shared by both sides)
    ("chosen", MESSAGES),  # [assistant: the proposal's corrected action]
    ("rejected", MESSAGES),  # [assistant: the original error step]
    ("case_id", pa.int64()),
    ("trace_id", pa.string()),
    ("error_step", pa.int64()),
    ("proposal_id", pa.int64()),
    ("proposal_status", pa.string()),
    ("grade", pa.string()),
    ("category", pa.string()),
])


def preferred_proposal(case: Case, evidence: Proposal | None) -> Proposal | None:
    """The accepted proposal (the evidence one if it is accepted, else the first accepted), else the one that
    grades the case (best replay, else the first not rejected)."""
    if evidence is not None and evidence.status == ProposalStatus.ACCEPTED:
        return evidence
    accepted = [p for p in case.proposals.all() if p.status == ProposalStatus.ACCEPTED]
    return accepted[0] if accepted else evidence


def preference_rows(query: ExportQuery) -> Iterator[list[dict]]:
    for page in graded_pages(query):
        rows = []
        for g in page:
            proposal = preferred_proposal(g.case, g.proposal)
            if proposal is None:
                continue
            [rejected] = step_messages(g.case.trace.steps[g.case.error_step], observation=False)
            chosen = _message("assistant", proposal.corrected_action)
            if rejected["role"] != "assistant" or rejected["content"].strip() == chosen["content"].strip():
                continue  # not an agent's step, or nothing to prefer
            rows.append({
                "id": _key(g.case), "prompt": prefix_messages(g.case), "chosen": [chosen], "rejected": [rejected],
                "case_id": g.case.pk, "trace_id": g.case.trace.trace_id, "error_step": g.case.error_step,
                "proposal_id": proposal.pk, "proposal_status": proposal.status, "grade": g.grade,
                "category": g.case.category,
            })
        yield rows


# --- aed.pairs ----------------------------------------------------------------------------------------------

PAIRS_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("case_id", pa.int64()),
    ("trace_id", pa.string()),
    ("task_id", pa.string()),
    ("environment", pa.string()),
    ("harness", pa.string()),
    ("policy_model", pa.string()),
    ("curator", pa.string()),
    ("taxonomy", pa.string()),
    ("taxonomy_version", pa.string()),
    ("error_step", pa.int64()),
    ("category", pa.string()),
    ("diagnosis", pa.string()),
    ("evidence_json", pa.string()),
    ("evidence_check", pa.string()),
    ("model_authored", pa.bool_()),  # the case's diagnosis came from a model and no human edited it since
    # The proposal that grades the case (null: none); its replay's evidence (null: not replayed).
    ("proposal_id", pa.int64()),
    ("corrected_action", pa.string()),
    ("proposal_status", pa.string()),
    ("proposal_model_authored", pa.bool_()),
    ("replay_id", pa.int64()),
    ("replay_pairs", pa.int64()),
    ("n11", pa.int64()),
    ("n10", pa.int64()),
    ("n01", pa.int64()),
    ("n00", pa.int64()),
    ("pass_rate_c", pa.float64()),
    ("pass_rate_r", pa.float64()),
    ("net_gain", pa.float64()),
    ("double_pass_share", pa.float64()),
    ("ci_low", pa.float64()),
    ("ci_high", pa.float64()),
    ("mcnemar_p", pa.float64()),
    ("significant", pa.bool_()),
    ("grade", pa.string()),
])
STAT_COLUMNS = ("pass_rate_c", "pass_rate_r", "net_gain", "double_pass_share", "ci_low", "ci_high", "mcnemar_p",
                "significant")


def pair_rows(query: ExportQuery) -> Iterator[list[dict]]:
    for page in graded_pages(query, with_steps=False):
        rows = []
        for g in page:
            case, trace, proposal, replay = g.case, g.case.trace, g.proposal, g.replay
            evidence = replay.stats if replay else {}
            rows.append({
                "id": _key(case), "case_id": case.pk, "task_id": trace.task_id, **_trace_columns(case),
                "curator": case.curator.username if case.curator else None,
                "taxonomy": case.taxonomy.name, "taxonomy_version": case.taxonomy.version,
                "error_step": case.error_step, "category": case.category, "diagnosis": case.diagnosis,
                "evidence_json": json.dumps(case.evidence, sort_keys=True), "evidence_check": case.evidence_check,
                "model_authored": case.model_authored,
                "proposal_id": proposal.pk if proposal else None,
                "corrected_action": proposal.corrected_action if proposal else None,
                "proposal_status": proposal.status if proposal else None,
                "proposal_model_authored": proposal.model_authored if proposal else None,
                "replay_id": replay.pk if replay else None, "replay_pairs": evidence.get("pairs"),
                **{cell: getattr(replay, cell) if replay else None for cell in ("n11", "n10", "n01", "n00")},
                **{column: evidence.get(column) for column in STAT_COLUMNS},
                "grade": g.grade,
            })
        yield rows


# --- the kinds ------------------------------------------------------------------------------------------------

COMMON = {"data_version": data_version, "filters": AedFilters, "count": _count, "key_field": "id"}

register(ExportKind(
    name="aed.diagnosis_sft", version=1, schema=DIAGNOSIS_SCHEMA, label="AED diagnosis SFT",
    description="One row per submitted case: the run up to and including the error step, answered with the error "
                "step, its category and the diagnosis (chat messages), plus the case's structured fields.",
    rows=diagnosis_rows, dedup_ignore=("id", "case_id", "trace_id"), **COMMON))
register(ExportKind(
    name="aed.recovery", version=1, schema=RECOVERY_SCHEMA, label="AED recovery (AREX-style)",
    description="The run with its error kept in context, continued by a passing corrected replay; loss_mask "
                "(per message) is 1 only on the recovery's assistant turns.",
    rows=recovery_rows, dedup_ignore=("id", "case_id", "trace_id", "proposal_id", "replay_id", "run_pair",
                                      "run_seed"), **COMMON))
register(ExportKind(
    name="aed.preference", version=1, schema=PREFERENCE_SCHEMA, label="AED preference pairs",
    description="TRL preference rows at the checkpoint before the error step: the corrected action (chosen) "
                "against the original error step (rejected), with the shared prompt.",
    rows=preference_rows, dedup_ignore=("id", "case_id", "trace_id", "proposal_id", "proposal_status"), **COMMON))
register(ExportKind(
    name="aed.pairs", version=1, schema=PAIRS_SCHEMA, label="AED error-diagnosis pairs",
    description="The full error-diagnosis record of each submitted case with its proposal and replay evidence "
                "(2x2 table, pass rates, net gain with Newcombe's 95% CI, McNemar p, grade).",
    rows=pair_rows, dedup_ignore=("id", "case_id", "trace_id", "curator", "proposal_id", "replay_id"), **COMMON))
