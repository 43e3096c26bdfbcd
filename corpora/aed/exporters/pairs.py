"""`aed.pairs`: the full error-diagnosis record of each submitted case with its proposal and replay evidence
(2x2 table, pass rates, net gain with Newcombe's 95% CI, McNemar p, grade)."""

import json
from collections.abc import Iterator

import pyarrow as pa

from dataplatform.exports.registry import ExportKind, ExportQuery, register

from .cases import COMMON, RETRY_ARM, WHO_COLUMNS, graded_pages, retry_arm, row_key, trace_columns, who_columns

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
    RETRY_ARM,
    *WHO_COLUMNS,
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
                "id": row_key(case), "case_id": case.pk, "task_id": trace.task_id, **trace_columns(case),
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
                "grade": g.grade, **retry_arm(g), **who_columns(case),
            })
        yield rows


register(ExportKind(
    name="aed.pairs", version=2, schema=PAIRS_SCHEMA, label="AED error-diagnosis pairs",
    description="The full error-diagnosis record of each submitted case with its proposal and replay evidence "
                "(2x2 table, pass rates, net gain with Newcombe's 95% CI, McNemar p, grade).",
    rows=pair_rows, dedup_ignore=("id", "case_id", "trace_id", "curator", "proposal_id", "replay_id"), **COMMON))
