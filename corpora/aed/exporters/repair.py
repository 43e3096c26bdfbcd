"""`aed.repair`: the action-only repair view, in TRL's conversational prompt-completion form: the context up to
the error step (`prompt`, the same messages a preference row starts from) and the corrected action
(`completion`), so the loss falls on the repair alone."""

from collections.abc import Iterator

import pyarrow as pa
from django.utils.translation import gettext_lazy

from dataplatform.conversations.training import TOOLS, messages_cell, record_batch, tools_cell
from dataplatform.exports.registry import ExportKind, ExportQuery, register

from .cases import COMMON, RETRY_ARM, graded_pages, leave_out, retry_arm, row_key
from .preference import CHECKPOINT_MEANINGS, NO_PROPOSAL, preferred_proposal
from .rendering import MESSAGES, chat_message, prefix_messages

REPAIR_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("prompt", MESSAGES),  # the task and the steps before the error step
    ("completion", MESSAGES),  # [assistant: the proposal's corrected action]
    ("tools", TOOLS),  # the function schemas the trace's agent was offered; null when none
    ("case_id", pa.int64()),
    ("trace_id", pa.string()),
    ("task_id", pa.string()),  # the split's group (else the trace)
    ("error_step", pa.int64()),
    ("proposal_id", pa.int64()),
    ("proposal_status", pa.string()),
    ("grade", pa.string()),
    ("category", pa.string()),
    RETRY_ARM,
])
REPAIR_MEANINGS = {
    **CHECKPOINT_MEANINGS,
    "completion": "The proposal's corrected action alone, as one assistant message: the loss falls on the repair.",
}


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


register(ExportKind(
    # 2: cases neither replayed nor evidence-checked too (grade null), by the evidence filter's default.
    # 3: the task as the policy saw it (a builtin environment's rules and task); task_id, the split's group.
    name="aed.repair", version=3, trl_format="prompt_completion", schema=REPAIR_SCHEMA,
    label=gettext_lazy("AED repair (context to the corrected action)"),
    description="TRL prompt/completion rows: the run up to the error step, completed by the corrected action "
                "alone (the accepted proposal, else the one that grades the case).",
    rows=repair_rows, dedup_ignore=("id", "case_id", "trace_id", "task_id", "proposal_id", "proposal_status"),
    field_meanings=REPAIR_MEANINGS, **COMMON))
