"""`aed.preference`: TRL preference rows at the checkpoint before the error step, the corrected action
(chosen) against the original error step (rejected), with the shared prompt."""

from collections.abc import Iterator

import pyarrow as pa
from django.utils.translation import gettext_lazy

from dataplatform.conversations.training import TOOLS, TOOLS_MEANINGS, messages_cell, record_batch, tools_cell
from dataplatform.exports.registry import ExportKind, ExportQuery, register

from ..models import Case, Proposal, ProposalStatus
from .cases import COMMON, RETRY_ARM, RETRY_ARM_MEANING, case_meanings, graded_pages, leave_out, retry_arm, row_key
from .rendering import MESSAGES, chat_message, prefix_messages, step_messages

PREFERENCE_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("prompt", MESSAGES),  # the task and the steps before the error step (shared by both sides)
    ("chosen", MESSAGES),  # [assistant: the proposal's corrected action]
    ("rejected", MESSAGES),  # [assistant: the original error step, with its reasoning and tool calls]
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
# The columns aed.repair shares with this kind: the same checkpoint, and the same proposal.
CHECKPOINT_MEANINGS = {
    **case_meanings("id", "case_id", "trace_id", "task_id", "error_step", "grade", "category"),
    "prompt": "The context at the checkpoint before the error step: the task as the traced policy saw it (a builtin "
              "environment's rules and task; a conversation's own prompt; else a \"Task: ...\" message after the "
              "trace's leading system messages), then every step before the error step.",
    **TOOLS_MEANINGS,
    "proposal_id": "The proposal whose corrected action the row holds: the case's accepted proposal, else the one "
                   "that grades the case.",
    "proposal_status": "That proposal's status: accepted, else proposed (when none of the case's is accepted).",
    **RETRY_ARM_MEANING,
}
PREFERENCE_MEANINGS = {
    **CHECKPOINT_MEANINGS,
    "chosen": "The proposal's corrected action, as one assistant message.",
    "rejected": "The original error step as the agent took it (its reasoning and tool calls included), as one "
                "assistant message.",
}


NO_PROPOSAL = "no proposal (a corrected action) to train on"
NOTHING_TO_PREFER = "the error step is not the agent's, or the proposal repeats it: nothing to prefer"


def preferred_proposal(case: Case, evidence: Proposal | None) -> Proposal | None:
    """The accepted proposal (the evidence one if it is accepted, else the first accepted), else the one that
    grades the case (best replay, else the first not rejected)."""
    if evidence is not None and evidence.status == ProposalStatus.ACCEPTED:
        return evidence
    accepted = [p for p in case.proposals.all() if p.status == ProposalStatus.ACCEPTED]
    return accepted[0] if accepted else evidence


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


register(ExportKind(
    # 4: cases neither replayed nor evidence-checked too (grade null), by the evidence filter's default.
    # 5: the task as the policy saw it (a builtin environment's rules and task); task_id, the split's group.
    name="aed.preference", version=5, trl_format="preference", schema=PREFERENCE_SCHEMA,
    label=gettext_lazy("AED preference pairs"),
    description="TRL preference rows at the checkpoint before the error step: the corrected action (chosen) "
                "against the original error step (rejected), with the shared prompt.",
    rows=preference_rows, dedup_ignore=("id", "case_id", "trace_id", "task_id", "proposal_id", "proposal_status"),
    field_meanings=PREFERENCE_MEANINGS, **COMMON))
