"""`aed.recovery` (AREX-2, recovery in context): one row per run of a recovery replay (arm E). The failure stays
in the prompt: the task, the steps before the error, the erroneous step with the observation it really got
(and the diagnosis after it when the policy was shown it as a hint); then the policy's continuation. Loss falls
only on the continuation's decisions that make progress (steps marked `progress` by the runner: the step that
passes, or raises the environment's score over the best so far), never on the error:

- `loss_mask`, per message (1 on those assistant messages);
- `input_ids`, `completion_mask` and `labels` (-100 off the mask), per token, under the platform model's chat template (the trainer-ready
  form TRL's SFT trainer reads), with the tokenizer's and template's identity in every row and in the manifest. They
  are null when the backend has no tokenizer here or its template is not prefix-stable (counted in the notes).

A run whose continuation makes no progress has nothing to train on and is left out."""

from collections.abc import Iterator

import pyarrow as pa
from django.utils.translation import gettext_lazy

from dataplatform.conversations.token_masks import (
    IDENTITY_COLUMNS,
    IDENTITY_MEANINGS,
    TOKEN_COLUMNS,
    TOKEN_MEANINGS,
    NotPrefixStable,
    completion_mask,
    identity_columns,
    note_identity,
    token_columns,
)
from dataplatform.conversations.training import TOOLS, TOOLS_MEANINGS, messages_cell, record_batch, tools_cell
from dataplatform.exports.registry import ExportKind, ExportQuery, register
from dataplatform.inference import backend_for

from ..models import Case, Replay, ReplayMode, ReplayRun
from .cases import (
    COMMON,
    RETRY_ARM,
    RETRY_ARM_MEANING,
    TRACE_MEANINGS,
    Bound,
    case_meanings,
    graded_pages,
    leave_out,
    retry_arm,
    row_key,
    trace_columns,
)
from .rendering import MESSAGES, prefix_messages, step_messages

RECOVERY_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("messages", MESSAGES),  # task, steps before the error, the error step and its real observation, the recovery
    ("loss_mask", pa.list_(pa.int64())),  # per message: 1 on the recovery's assistant turns that make progress
    # The messages under the chat template of `template_model`; per token 1 on the messages with loss.
    *TOKEN_COLUMNS,
    *IDENTITY_COLUMNS,  # the tokenizer and chat template the ids belong to
    ("tools", TOOLS),  # the function schemas the trace's agent was offered; null when none
    ("case_id", pa.int64()),
    ("trace_id", pa.string()),
    ("task_id", pa.string()),  # the split's group (else the trace)
    ("error_step", pa.int64()),
    ("category", pa.string()),
    ("grade", pa.string()),
    ("replay_id", pa.int64()),  # the recovery replay the run belongs to
    ("run_id", pa.int64()),
    ("run_pair", pa.int64()),
    ("run_seed", pa.int64()),
    ("passed", pa.bool_()),  # the run recovered all the way (progress may also be partial)
    ("hint", pa.bool_()),  # the policy was shown the diagnosis after the error
    ("environment", pa.string()),
    ("harness", pa.string()),
    ("policy_model", pa.string()),
    RETRY_ARM,
])
RECOVERY_MEANINGS = {
    "id": 'The case as "case-<case id>", shared by all its runs.',
    "messages": "The task, the steps before the error, the error step with the observation it really got (and the "
                "diagnosis as a hint, when the policy was shown it), then the policy's continuation.",
    **TOOLS_MEANINGS,
    "loss_mask": "Per message: 1 on the continuation's assistant messages whose step made progress, 0 elsewhere "
                 "(never on the error).",
    **TOKEN_MEANINGS,
    "input_ids": "messages and tools as token ids under the chat template of template_model; null when the export "
                 "had no tokenizer here or the template is not prefix-stable.",
    "completion_mask": "Per token of input_ids: 1 on the tokens of the messages loss_mask marks (their end-of-turn "
                       "included), 0 elsewhere.",
    **IDENTITY_MEANINGS,
    **case_meanings("case_id", "error_step", "category", "grade"),
    **TRACE_MEANINGS,
    "replay_id": "The recovery replay the run belongs to.",
    "run_id": "The run: one continuation by the policy, with the error kept in its context (arm E).",
    "run_pair": "The run's number within its replay.",
    "run_seed": "The seed the run was sampled with.",
    "passed": "The run recovered all the way (the environment passed it); a run that did not may still make "
              "progress.",
    "hint": "The policy was shown the diagnosis as a hint after the error step's observation.",
    **RETRY_ARM_MEANING,
}


def _recovery_runs(cases: list[Case], run_bound: int) -> dict[int, list[tuple[Replay, ReplayRun]]]:
    """case id -> (replay, run) of its recovery replays' runs up to the bound, in replay and pair order."""
    replays = {replay.pk: (case.pk, replay) for case in cases for proposal in case.proposals.all()
               for replay in proposal.replays.all() if replay.mode == ReplayMode.RECOVERY}
    runs: dict[int, list[tuple[Replay, ReplayRun]]] = {}
    for run in (ReplayRun.objects.filter(replay_id__in=list(replays), arm="E", id__lte=run_bound)
                .order_by("replay_id", "pair")):
        case_id, replay = replays[run.replay_id]
        runs.setdefault(case_id, []).append((replay, run))
    return runs


def recovery_messages(case: Case, run: ReplayRun, hint: str = "", max_steps: int | None = None
                      ) -> tuple[list[dict], list[int]]:
    """(messages, loss_mask): the context and the error with its observation (mask 0), then the continuation,
    whose assistant messages carry loss where their step made progress. The context states the task as the
    run's policy saw it: a builtin environment's rules under the replay's step limit `max_steps`."""
    messages = prefix_messages(case, max_steps=max_steps)
    mask = [0] * len(messages)
    for step in run.steps:
        if not isinstance(step, dict) or step.get("origin") == "prefix":
            continue
        rendered = step_messages(step)
        if hint and step.get("origin") == "original" and len(rendered) > 1:  # as the policy saw it
            rendered[-1] = {**rendered[-1], "content": f"{rendered[-1]['content']}\nHint: {hint}"}
        messages += rendered
        mask += [int(bool(step.get("progress")) and message["role"] == "assistant") for message in rendered]
    return messages, mask


class _Tokens:
    """The platform model's tokenizer for the token columns, looked up once per export."""

    def __init__(self, query: ExportQuery):
        self.query = query
        self.backend = backend_for(query.project, model="")
        self.identity = note_identity(query.notes, self.backend)

    def columns(self, messages: list[dict], tools, mask: list[int]) -> dict:
        empty = {**token_columns(None, None), **identity_columns(None)}
        if self.identity is None:
            return empty
        try:
            ids, token_mask = completion_mask(self.backend.tokenizer, messages, list(tools) or None, mask)
        except NotPrefixStable:
            self.query.notes["rows_without_tokens"] = self.query.notes.get("rows_without_tokens", 0) + 1
            return empty
        return {**token_columns(ids, token_mask), **identity_columns(self.identity)}


def recovery_rows(query: ExportQuery) -> Iterator[pa.RecordBatch]:
    bound = Bound.parse(query.data_version)
    tokens = None
    for page in graded_pages(query):
        runs = _recovery_runs([g.case for g in page], bound.runs)
        rows = []
        for g in page:
            made = len(rows)
            for replay, run in runs.get(g.case.pk, []):
                hint = str(replay.options.get("hint") or "")
                messages, mask = recovery_messages(g.case, run, hint, replay.options.get("max_steps"))
                if not any(mask):  # no decision after the failure made progress: nothing to train on
                    continue
                tokens = tokens or _Tokens(query)
                training = [{key: value for key, value in message.items() if value is not None} for message in messages]
                rows.append({
                    # Keyed on the case, as every AED kind: all runs of a case fall in the same split.
                    "id": row_key(g.case), "run_id": run.pk, "messages": messages_cell(messages), "loss_mask": mask,
                    **tokens.columns(training, g.case.trace.tools, mask),
                    "tools": tools_cell(g.case.trace.tools), "case_id": g.case.pk, "error_step": g.case.error_step,
                    "category": g.case.category, "grade": g.grade, "replay_id": replay.pk, "run_pair": run.pair,
                    "run_seed": run.seed, "passed": run.passed, "hint": bool(hint), **trace_columns(g.case),
                    **retry_arm(g),
                })
            if len(rows) == made:
                leave_out(query, "no recovery run in which a decision after the failure made progress"
                          if runs.get(g.case.pk) else "no run of a recovery replay")
        yield record_batch(rows, RECOVERY_SCHEMA)


register(ExportKind(
    # 4: labels beside completion_mask; the tokenizer's hash beside the template's; the identity in the manifest.
    # 5: cases neither replayed nor evidence-checked too (grade null), by the evidence filter's default.
    # 6: the task as the policy saw it (a builtin environment's rules and task, under the replay's step limit);
    # task_id, the split's group.
    name="aed.recovery", version=6, trl_format="tokenized", schema=RECOVERY_SCHEMA,
    label=gettext_lazy("AED recovery in context (AREX-2)"),
    description="One row per run of a recovery replay: the error and its real observation kept in the prompt, the "
                "policy's continuation after it; loss only on the decisions that make progress (per message, and "
                "per token as input_ids + completion_mask under the model's chat template).",
    rows=recovery_rows, field_meanings=RECOVERY_MEANINGS, **COMMON))
