"""The old row generators of `aed.preference`, `aed.repair` and `aed.pairs` (Python rows= kinds before issue 43),
kept as the oracle of their stored kinds (tests/kind_oracle.py): each case graded from its replays' runs up to
the data version (`cases.graded_pages`), its rows rendered at export time."""

import json
from collections.abc import Iterator

import pyarrow as pa

from corpora.aed.exporters.cases import graded_pages, leave_out, retry_arm, row_key, trace_columns, who_columns
from corpora.aed.exporters.pairs import STAT_COLUMNS
from corpora.aed.exporters.preference import NO_PROPOSAL, NOTHING_TO_PREFER, PREFERENCE_SCHEMA, preferred_proposal
from corpora.aed.exporters.rendering import chat_message, prefix_messages, step_messages
from corpora.aed.exporters.repair import REPAIR_SCHEMA
from dataplatform.conversations.training import messages_cell, record_batch, tools_cell
from dataplatform.exports.registry import ExportQuery


def preference_rows(query: ExportQuery) -> Iterator[pa.RecordBatch]:
    for page in graded_pages(query):
        rows = []
        for g in page:
            proposal = preferred_proposal(g.case, g.proposal)
            if proposal is None:
                leave_out(query, NO_PROPOSAL)
                continue
            [rejected] = step_messages(g.case.trace.steps[g.case.error_step], observation=False)
            chosen = chat_message("assistant", proposal.corrected_action)
            same = not rejected.get("tool_calls") and rejected["content"].strip() == chosen["content"].strip()
            if rejected["role"] != "assistant" or same:
                leave_out(query, NOTHING_TO_PREFER)
                continue
            rows.append({
                "id": row_key(g.case), "prompt": messages_cell(prefix_messages(g.case)), "chosen": [chosen],
                "rejected": messages_cell([rejected]), "tools": tools_cell(g.case.trace.tools), "case_id": g.case.pk,
                "trace_id": g.case.trace.trace_id, "task_id": g.case.trace.task_id,
                "error_step": g.case.error_step,
                "proposal_id": proposal.pk, "proposal_status": proposal.status, "grade": g.grade,
                "category": g.case.category, **retry_arm(g),
            })
        yield record_batch(rows, PREFERENCE_SCHEMA)


def repair_rows(query: ExportQuery) -> Iterator[pa.RecordBatch]:
    for page in graded_pages(query):
        rows = []
        for g in page:
            proposal = preferred_proposal(g.case, g.proposal)
            if proposal is None:
                leave_out(query, NO_PROPOSAL)
                continue
            rows.append({
                "id": row_key(g.case), "prompt": messages_cell(prefix_messages(g.case)),
                "completion": [chat_message("assistant", proposal.corrected_action)],
                "tools": tools_cell(g.case.trace.tools), "case_id": g.case.pk, "trace_id": g.case.trace.trace_id,
                "task_id": g.case.trace.task_id,
                "error_step": g.case.error_step, "proposal_id": proposal.pk, "proposal_status": proposal.status,
                "grade": g.grade, "category": g.case.category, **retry_arm(g),
            })
        yield record_batch(rows, REPAIR_SCHEMA)


def pair_rows(query: ExportQuery) -> Iterator[list[dict]]:
    for page in graded_pages(query, with_steps=False):
        rows = []
        for g in page:
            case, proposal, replay = g.case, g.proposal, g.replay
            evidence = replay.stats if replay else {}
            rows.append({
                "id": row_key(case), "case_id": case.pk, **trace_columns(case),
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
