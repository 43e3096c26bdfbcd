"""`aed.diagnosis_sft`: the run up to and including the error step (and, in a trajectory, the tool results
answering it), answered with the error step, its category and the diagnosis: as `messages` (TRL's conversational
language modeling) and as `prompt` / `completion` (its prompt-completion format, loss on the diagnosis only,
which its SFT trainer picks by itself when both are there)."""

import json
from collections.abc import Iterator

import pyarrow as pa
from django.utils.translation import gettext_lazy

from dataplatform.conversations.training import messages_cell
from dataplatform.exports.registry import ExportKind, StoredRows, register

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
from .rendering import MESSAGES, chat_message, error_step_end, task_text, transcript

DIAGNOSIS_SYSTEM = "You find the first decisive error in an agent's run and diagnose it."

DIAGNOSIS_SCHEMA = pa.schema([
    ("id", pa.string()),  # "case-<case id>"
    ("messages", MESSAGES),  # system, user (task + steps up to and including the error step), assistant (diagnosis)
    ("prompt", MESSAGES),  # the system and user messages
    ("completion", MESSAGES),  # the assistant's diagnosis
    ("case_id", pa.int64()),
    ("trace_id", pa.string()),
    ("task_id", pa.string()),  # the split's group (else the trace)
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
    RETRY_ARM,
    *WHO_COLUMNS,
])
DIAGNOSIS_MEANINGS = {
    "messages": "Three chat messages: system (find and diagnose the first decisive error), user (the task, the steps "
                "up to and including the error step, the taxonomy's categories), assistant (error step, category, "
                "diagnosis).",
    "prompt": "The system and user messages of messages.",
    "completion": 'The assistant\'s answer: "Error step: <i>", "Category: <slug>", "Diagnosis: <text>".',
    **case_meanings("id", "case_id", "error_step", "category", "diagnosis", "evidence_json", "evidence_check",
                    "grade", "taxonomy", "taxonomy_version"),
    **TRACE_MEANINGS, **RETRY_ARM_MEANING, **WHO_MEANINGS,
}


def diagnosis_messages(case: Case) -> list[dict]:
    trace, taxonomy = case.trace, case.taxonomy
    question = (f"{task_text(trace)}\n\nSteps:\n{transcript(trace.steps[:error_step_end(case)])}\n\n"
                f"Error categories ({taxonomy.name} v{taxonomy.version}): {', '.join(taxonomy.slugs)}")
    answer = f"Error step: {case.error_step}\nCategory: {case.category}\nDiagnosis: {case.diagnosis}"
    return [chat_message("system", DIAGNOSIS_SYSTEM), chat_message("user", question),
            chat_message("assistant", answer)]


def derive_diagnosis(project, case_ids: list[int]) -> Iterator[tuple[int, dict]]:
    """A row per case, but its GRADE_COLUMNS (read at export time)."""
    for g in graded_by_ids(project, case_ids):
        yield g.case.pk, {
            "id": row_key(g.case), **_conversation(diagnosis_messages(g.case)), "case_id": g.case.pk,
            "error_step": g.case.error_step, "category": g.case.category, "diagnosis": g.case.diagnosis,
            "evidence_json": json.dumps(g.case.evidence, sort_keys=True), "evidence_check": g.case.evidence_check,
            "taxonomy": g.case.taxonomy.name, "taxonomy_version": g.case.taxonomy.version,
            **trace_columns(g.case), **who_columns(g.case),
        }


def _conversation(messages: list[dict]) -> dict:
    cell = messages_cell(messages)
    return {"messages": cell, "prompt": cell[:-1], "completion": cell[-1:]}


register(ExportKind(
    # 4: prompt and completion beside messages. 5: cases neither replayed nor evidence-checked too (grade null),
    # by the evidence filter's default. 6: the task as the policy saw it (a builtin environment's rules and task);
    # task_id, the split's group.
    name="aed.diagnosis_sft", version=6, trl_format="prompt_completion", schema=DIAGNOSIS_SCHEMA,
    label=gettext_lazy("AED diagnosis SFT"),
    description="One row per submitted case: the run up to and including the error step, answered with the error "
                "step, its category and the diagnosis (chat messages, and as prompt / completion), plus the case's "
                "structured fields.",
    # Derived once per case and revision (a case's updated_at moves with every change to it or to what grades it);
    # the grade and the retry arm are read at export time, in SQL, and so are the cases the grade filters admit.
    stored=StoredRows(model=Case, sources=selected_cases, derive=derive_diagnosis, live_columns=GRADE_COLUMNS,
                      live=live_grade_columns, revision="updated_at", notes=note_grades_left_out),
    dedup_ignore=("id", "case_id", "trace_id", "task_id"), field_meanings=DIAGNOSIS_MEANINGS, **COMMON))
