"""`aed.recovery` (AREX-style): the run with its error kept in context, continued by a passing corrected
replay; `loss_mask` is 1 only on the recovery's assistant turns."""

from collections.abc import Iterator

import pyarrow as pa

from dataplatform.conversations.training import TOOLS, messages_cell, record_batch, tools_cell
from dataplatform.exports.registry import ExportKind, ExportQuery, register

from ..models import Case, ReplayRun
from .cases import COMMON, RETRY_ARM, Bound, graded_pages, retry_arm, row_key, trace_columns
from .rendering import MESSAGES, error_step_end, prefix_messages, step_messages

RECOVERY_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("messages", MESSAGES),  # task, steps before the error, the error step and its observation, the recovery
    ("loss_mask", pa.list_(pa.int64())),  # per message: 1 on the recovery's assistant turns, else 0
    ("tools", TOOLS),  # the function schemas the trace's agent was offered; null when none
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
    RETRY_ARM,
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
    context = prefix_messages(case) + [message for step in case.trace.steps[case.error_step:error_step_end(case)]
                                       for message in step_messages(step)]
    recovery = [message for step in run.steps if isinstance(step, dict) and step.get("origin") != "prefix"
                for message in step_messages(step)]
    mask = [0] * len(context) + [int(message["role"] == "assistant") for message in recovery]
    return context + recovery, mask


def recovery_rows(query: ExportQuery) -> Iterator[pa.RecordBatch]:
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
                "id": row_key(g.case), "messages": messages_cell(messages), "loss_mask": mask,
                "tools": tools_cell(g.case.trace.tools), "case_id": g.case.pk,
                "error_step": g.case.error_step, "category": g.case.category, "grade": g.grade,
                "proposal_id": g.proposal.pk, "corrected_action": g.proposal.corrected_action,
                "replay_id": g.replay.pk, "run_pair": run.pair, "run_seed": run.seed, **trace_columns(g.case),
                **retry_arm(g),
            })
        yield record_batch(rows, RECOVERY_SCHEMA)


register(ExportKind(
    name="aed.recovery", version=3, schema=RECOVERY_SCHEMA, label="AED recovery (AREX-style)",
    description="The run with its error kept in context, continued by a passing corrected replay; loss_mask "
                "(per message) is 1 only on the recovery's assistant turns.",
    rows=recovery_rows, dedup_ignore=("id", "case_id", "trace_id", "proposal_id", "replay_id", "run_pair",
                                      "run_seed"), **COMMON))
