"""`aed.repair`: the action-only repair view, in TRL's conversational prompt-completion form: the context up to
the error step (`prompt`, the same messages a preference row starts from) and the corrected action
(`completion`), so the loss falls on the repair alone."""

from collections.abc import Iterator

import pyarrow as pa
from django.utils.translation import gettext_lazy

from dataplatform.conversations.training import TOOLS, messages_cell
from dataplatform.exports.registry import ExportKind, ExportQuery, StoredRows, register

from ..models import Case
from .cases import (
    COMMON,
    GRADE_COLUMNS,
    RETRY_ARM,
    graded_by_ids,
    live_grade_columns,
    note_grades_left_out,
    row_key,
    selected_cases,
)
from .preference import CHECKPOINT_MEANINGS, NO_PROPOSAL, checkpoint_columns, preferred_proposal, without_proposal
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


def derive_repair(project, case_ids: list[int]) -> Iterator[tuple[int, dict]]:
    """A row per case with a proposal, but its GRADE_COLUMNS."""
    for g in graded_by_ids(project, case_ids):
        if (proposal := preferred_proposal(g.case, g.proposal)) is not None:
            yield g.case.pk, {"id": row_key(g.case), "prompt": messages_cell(prefix_messages(g.case)),
                              "completion": [chat_message("assistant", proposal.corrected_action)],
                              **checkpoint_columns(g.case, proposal)}


def repair_notes(query: ExportQuery) -> None:
    """The cases left out: by grade, and for want of a proposal, counted in SQL."""
    note_grades_left_out(query)
    if no_proposal := without_proposal(query).count():
        query.notes.setdefault("left_out", {})[NO_PROPOSAL] = no_proposal


register(ExportKind(
    # 2: cases neither replayed nor evidence-checked too (grade null), by the evidence filter's default.
    # 3: the task as the policy saw it (a builtin environment's rules and task); task_id, the split's group.
    name="aed.repair", version=3, trl_format="prompt_completion", schema=REPAIR_SCHEMA,
    label=gettext_lazy("AED repair (context to the corrected action)"),
    description="TRL prompt/completion rows: the run up to the error step, completed by the corrected action "
                "alone (the accepted proposal, else the one that grades the case).",
    # Derived once per case and revision, as aed.preference; the grade and the retry arm read in SQL.
    stored=StoredRows(model=Case, sources=selected_cases, derive=derive_repair, live_columns=GRADE_COLUMNS,
                      live=live_grade_columns, revision="updated_at", notes=repair_notes),
    dedup_ignore=("id", "case_id", "trace_id", "task_id", "proposal_id", "proposal_status"),
    field_meanings=REPAIR_MEANINGS, **COMMON))
