"""`aed.pairs`: the full error-diagnosis record of each submitted case with its proposal and replay evidence
(2x2 table, pass rates, net gain with Newcombe's 95% CI, McNemar p, grade)."""

import json
from collections.abc import Iterator

import pyarrow as pa
from django.db.models import Subquery
from django.utils.translation import gettext_lazy

from dataplatform.exports.registry import ExportKind, ExportQuery, StoredRows, register

from ..models import Case
from .cases import (
    COMMON,
    GRADE_COLUMNS,
    RETRY_ARM,
    RETRY_ARM_MEANING,
    TRACE_MEANINGS,
    WHO_COLUMNS,
    WHO_MEANINGS,
    case_meanings,
    graded_by_ids,
    live_grade_columns,
    note_grades_left_out,
    row_key,
    selected_cases,
    trace_columns,
    who_columns,
)

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
PAIRS_MEANINGS = {
    **case_meanings("id", "case_id", "taxonomy", "taxonomy_version", "error_step", "category", "diagnosis",
                    "evidence_json", "evidence_check", "grade"),
    **TRACE_MEANINGS,
    "curator": "Username of the curator whose case it is; null when that account is gone.",
    "model_authored": "The case's diagnosis came from a model and no human has edited it since.",
    "proposal_id": "The proposal that grades the case (a corrected action for the error step); null when none does.",
    "corrected_action": "That proposal's corrected action for the error step; null without a proposal.",
    "proposal_status": "That proposal's status: proposed or accepted (a rejected one never grades); null without "
                       "a proposal.",
    "proposal_model_authored": "That proposal came from a model; null without a proposal.",
    "replay_id": "That proposal's latest replay with a complete pair, whose runs grade the case; null when it was "
                 "not replayed.",
    "replay_pairs": "Complete pairs (both arms run) of that replay as it stands; null when not replayed.",
    "n11": "Pairs where both arms passed: the correction (arm C) and the retry (arm R); null when not replayed.",
    "n10": "Pairs where only the correction (arm C) passed; null when not replayed.",
    "n01": "Pairs where only the retry (arm R) passed; null when not replayed.",
    "n00": "Pairs where neither arm passed; null when not replayed.",
    "pass_rate_c": "The correction's pass rate, (n11 + n10) / pairs, in [0, 1]; null when not replayed.",
    "pass_rate_r": "The retry's pass rate, (n11 + n01) / pairs, in [0, 1]; null when not replayed.",
    "net_gain": "pass_rate_c - pass_rate_r, (n10 - n01) / pairs, in [-1, 1]; null when not replayed.",
    "double_pass_share": "n11 / (n11 + n10): of the pairs the correction passes, the share the retry passes too; "
                         "null when the correction never passed.",
    "ci_low": "Lower end of Newcombe's 95% interval for net_gain (paired data); null when not replayed.",
    "ci_high": "Upper end of Newcombe's 95% interval for net_gain; null when not replayed.",
    "mcnemar_p": "Two-sided exact McNemar p of n10 against n01; null when not replayed.",
    "significant": "mcnemar_p is below the project's alpha and n10 != n01; null when not replayed.",
    **RETRY_ARM_MEANING, **WHO_MEANINGS,
}
STAT_COLUMNS = ("pass_rate_c", "pass_rate_r", "net_gain", "double_pass_share", "ci_low", "ci_high", "mcnemar_p",
                "significant")


def derive_pairs(project, case_ids: list[int]) -> Iterator[tuple[int, dict]]:
    """A row per case, but its LIVE_COLUMNS: the case's record, and the proposal and replay that grade it with the
    replay's table and statistics as they stand (by the project's significance level)."""
    for g in graded_by_ids(project, case_ids, with_steps=False):
        case, proposal, replay = g.case, g.proposal, g.replay
        evidence = replay.stats if replay else {}
        yield case.pk, {
            "id": row_key(case), "case_id": case.pk, **trace_columns(case),
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
            **who_columns(case),
        }


# The grade and the retry arm, and the curator's name (an account renamed or deleted moves no case).
LIVE_COLUMNS = (*GRADE_COLUMNS, "curator")


def live_pair_columns(query: ExportQuery, case) -> dict:
    curator = Case.objects.filter(pk=case).values("curator__username")[:1]
    return {**live_grade_columns(query, case), "curator": Subquery(curator)}


register(ExportKind(
    # 3: cases neither replayed nor evidence-checked too (grade null), by the evidence filter's default.
    # 4: the replay evidence as it stands (stored rows), no longer bounded by the data version's runs.
    name="aed.pairs", version=4, schema=PAIRS_SCHEMA, label=gettext_lazy("AED error-diagnosis pairs"),
    description="The full error-diagnosis record of each submitted case with its proposal and replay evidence "
                "(2x2 table, pass rates, net gain with Newcombe's 95% CI, McNemar p, grade).",
    # Derived once per case and revision (its updated_at moves with its proposals, a paired replay's table and the
    # project's grading rules); the grade and the retry arm (kept on the case) and the curator read at export time.
    stored=StoredRows(model=Case, sources=selected_cases, derive=derive_pairs, live_columns=LIVE_COLUMNS,
                      live=live_pair_columns, revision="updated_at", notes=note_grades_left_out),
    dedup_ignore=("id", "case_id", "trace_id", "curator", "proposal_id", "replay_id"),
    field_meanings=PAIRS_MEANINGS, **COMMON))
