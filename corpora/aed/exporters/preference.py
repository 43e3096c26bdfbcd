"""`aed.preference`: TRL preference rows at the checkpoint before the error step, the corrected action
(chosen) against the original error step (rejected), with the shared prompt."""

from collections.abc import Iterator

import pyarrow as pa
from django.db.models import Exists, OuterRef, QuerySet
from django.utils.translation import gettext_lazy

from dataplatform.conversations.training import TOOLS, TOOLS_MEANINGS, messages_cell, tools_cell
from dataplatform.exports import stored
from dataplatform.exports.registry import ExportKind, ExportQuery, StoredRows, get_kind, register

from ..models import Case, Proposal, ProposalStatus
from .cases import (
    COMMON,
    GRADE_COLUMNS,
    RETRY_ARM,
    RETRY_ARM_MEANING,
    case_meanings,
    graded_by_ids,
    live_grade_columns,
    note_grades_left_out,
    row_key,
    selected_cases,
)
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


def preferred_row(case: Case, proposal: Proposal) -> dict | None:
    """The preference row of a case and its preferred proposal, but its GRADE_COLUMNS; None when the error step
    is not the agent's, or the proposal repeats it."""
    [rejected] = step_messages(case.trace.steps[case.error_step], observation=False)
    chosen = chat_message("assistant", proposal.corrected_action)
    same = not rejected.get("tool_calls") and rejected["content"].strip() == chosen["content"].strip()
    if rejected["role"] != "assistant" or same:
        return None
    return {"id": row_key(case), "prompt": messages_cell(prefix_messages(case)), "chosen": [chosen],
            "rejected": messages_cell([rejected]), **checkpoint_columns(case, proposal)}


def checkpoint_columns(case: Case, proposal: Proposal) -> dict:
    """The columns aed.preference and aed.repair share but the conversation and the GRADE_COLUMNS."""
    return {"tools": tools_cell(case.trace.tools), "case_id": case.pk, "trace_id": case.trace.trace_id,
            "task_id": case.trace.task_id, "error_step": case.error_step, "proposal_id": proposal.pk,
            "proposal_status": proposal.status, "category": case.category}


def derive_preference(project, case_ids: list[int]) -> Iterator[tuple[int, dict]]:
    """A row per case with a proposal to prefer; none for the others (counted by `preference_notes`)."""
    for g in graded_by_ids(project, case_ids):
        proposal = preferred_proposal(g.case, g.proposal)
        if proposal is not None and (row := preferred_row(g.case, proposal)) is not None:
            yield g.case.pk, row


def without_proposal(query: ExportQuery) -> QuerySet[Case]:
    """The selected cases with no proposal that is not rejected: none to prefer or to train a repair on."""
    standing = Proposal.objects.filter(case=OuterRef("pk")).exclude(status=ProposalStatus.REJECTED)
    return selected_cases(query).filter(~Exists(standing))


def preference_notes(query: ExportQuery) -> None:
    """The cases left out: by grade, for want of a proposal, and where nothing is to be preferred, counted in SQL
    once every selected case has its rows."""
    kind = get_kind("aed.preference")
    note_grades_left_out(query)
    stored.build(kind, query)
    no_proposal = without_proposal(query).count()
    nothing = stored.sources_without_rows(kind, query).count() - no_proposal
    for reason, count in ((NO_PROPOSAL, no_proposal), (NOTHING_TO_PREFER, nothing)):
        if count:
            query.notes.setdefault("left_out", {})[reason] = count


register(ExportKind(
    # 4: cases neither replayed nor evidence-checked too (grade null), by the evidence filter's default.
    # 5: the task as the policy saw it (a builtin environment's rules and task); task_id, the split's group.
    name="aed.preference", version=5, trl_format="preference", schema=PREFERENCE_SCHEMA,
    label=gettext_lazy("AED preference pairs"),
    description="TRL preference rows at the checkpoint before the error step: the corrected action (chosen) "
                "against the original error step (rejected), with the shared prompt.",
    # Derived once per case and revision (its updated_at moves with its proposals, a paired replay's table and the
    # project's grading rules, which pick the preferred proposal); the grade and the retry arm read in SQL.
    stored=StoredRows(model=Case, sources=selected_cases, derive=derive_preference, live_columns=GRADE_COLUMNS,
                      live=live_grade_columns, revision="updated_at", notes=preference_notes),
    dedup_ignore=("id", "case_id", "trace_id", "task_id", "proposal_id", "proposal_status"),
    field_meanings=PREFERENCE_MEANINGS, **COMMON))
