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
from django.db.models import Count, Exists, Max, OuterRef, Q, QuerySet
from django.db.models.fields.json import KeyTextTransform
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
    remembered_note,
    template_identity,
    token_columns,
)
from dataplatform.conversations.training import TOOLS, TOOLS_MEANINGS, messages_cell, tools_cell
from dataplatform.exports import stored, stored_checks
from dataplatform.exports.models import StoredRow
from dataplatform.exports.registry import ExportKind, ExportQuery, StoredRows, get_kind, register
from dataplatform.inference import backend_for

from ..models import Case, Replay, ReplayMode, ReplayRun
from .cases import (
    COMMON,
    GRADE_COLUMNS,
    RETRY_ARM,
    RETRY_ARM_MEANING,
    TRACE_MEANINGS,
    Bound,
    case_meanings,
    live_grade_columns,
    note_grades_left_out,
    row_key,
    selected_cases,
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


def recovery_messages(case: Case, steps: list, hint: str = "", max_steps: int | None = None, *,
                      prefix: list[dict] | None = None) -> tuple[list[dict], list[int]]:
    """(messages, loss_mask): the context and the error with its observation (mask 0), then the continuation (a
    run's `steps`), whose assistant messages carry loss where their step made progress. The context states the
    task as the run's policy saw it: a builtin environment's rules under the replay's step limit `max_steps`
    (`prefix`: that context, when the caller has it already)."""
    messages = list(prefix if prefix is not None else prefix_messages(case, max_steps=max_steps))
    mask = [0] * len(messages)
    for step in steps:
        if not isinstance(step, dict) or step.get("origin") == "prefix":
            continue
        rendered = step_messages(step)
        if hint and step.get("origin") == "original" and len(rendered) > 1:  # as the policy saw it
            rendered[-1] = {**rendered[-1], "content": f"{rendered[-1]['content']}\nHint: {hint}"}
        messages += rendered
        mask += [int(bool(step.get("progress")) and message["role"] == "assistant") for message in rendered]
    return messages, mask


class _Tokens:
    """The platform model's tokenizer for the token columns, and its identity."""

    def __init__(self, project):
        self.backend = backend_for(project, model="")
        self.identity = template_identity(self.backend)

    def columns(self, messages: list[dict], tools, mask: list[int]) -> dict:
        empty = {**token_columns(None, None), **identity_columns(None)}
        if self.identity is None:
            return empty
        try:
            ids, token_mask = completion_mask(self.backend.tokenizer, messages, list(tools) or None, mask)
        except NotPrefixStable:
            return empty  # counted in the export's notes (rows_without_tokens)
        return {**token_columns(ids, token_mask), **identity_columns(self.identity)}


# --- stored rows: one source per run of a recovery replay (arm E) ---------------------------------------------

def recovery_runs(query: ExportQuery) -> QuerySet[ReplayRun]:
    """The runs of the recovery replays of the cases an export holds, up to the data version."""
    bound = Bound.parse(query.data_version)
    return ReplayRun.objects.filter(arm="E", replay__mode=ReplayMode.RECOVERY, id__lte=bound.runs,
                                    replay__proposal__case__in=selected_cases(query).values("pk"))


def derive_recovery(project, run_ids: list[int]) -> Iterator[tuple[int, dict]]:
    """A row per run whose continuation made progress (none for the others), but its GRADE_COLUMNS. The runs of
    a case share its context, rendered once."""
    runs = list(ReplayRun.objects.filter(pk__in=run_ids).order_by("pk")
                .values("pk", "replay_id", "pair", "seed", "passed", "steps"))
    replays = {replay.pk: replay for replay in Replay.objects.filter(pk__in={run["replay_id"] for run in runs})
               .select_related("proposal").only("pk", "options", "proposal__case_id")}
    cases = {case.pk: case for case in Case.objects.filter(
        pk__in={replay.proposal.case_id for replay in replays.values()}).select_related("trace")}
    tokens, prefixes = None, {}
    for run in runs:
        replay = replays[run["replay_id"]]
        case = cases[replay.proposal.case_id]
        hint, max_steps = str(replay.options.get("hint") or ""), replay.options.get("max_steps")
        if (case.pk, max_steps) not in prefixes:
            prefixes[case.pk, max_steps] = prefix_messages(case, max_steps=max_steps)
        messages, mask = recovery_messages(case, run["steps"], hint, prefix=prefixes[case.pk, max_steps])
        if not any(mask):  # no decision after the failure made progress: nothing to train on
            continue
        tokens = tokens or _Tokens(project)
        training = [{key: value for key, value in message.items() if value is not None} for message in messages]
        yield run["pk"], {
            # Keyed on the case, as every AED kind: all runs of a case fall in the same split.
            "id": row_key(case), "run_id": run["pk"], "messages": messages_cell(messages), "loss_mask": mask,
            **tokens.columns(training, case.trace.tools, mask),
            "tools": tools_cell(case.trace.tools), "case_id": case.pk, "error_step": case.error_step,
            "category": case.category, "replay_id": replay.pk, "run_pair": run["pair"], "run_seed": run["seed"],
            "passed": run["passed"], "hint": bool(hint), **trace_columns(case),
        }


def live_recovery_columns(query: ExportQuery, run) -> dict:
    return live_grade_columns(query, Case.objects.filter(proposals__replays__runs=run))


NO_RUN = "no run of a recovery replay"
NO_PROGRESS = "no recovery run in which a decision after the failure made progress"


def recovery_notes(query: ExportQuery) -> None:
    """The manifest's notes: the cases left out, by grade and for want of a run or of progress, and the rows left
    without token ids, counted in SQL once every selected run has its rows (the engine built them before); the
    tokenizer, when a row has ids. Two queries, on the grades kept on the cases."""
    kind = get_kind("aed.recovery")
    if _drop_rows_of_another_tokenizer(kind, query.project):
        stored.build(kind, query)
    bound = Bound.parse(query.data_version)
    runs = ReplayRun.objects.filter(arm="E", replay__mode=ReplayMode.RECOVERY, id__lte=bound.runs,
                                    replay__proposal__case=OuterRef("pk"))
    admitted = note_grades_left_out(query, aed_has_runs=Exists(runs))
    with_runs, cases = admitted.get((True,), 0), sum(admitted.values())
    selected = StoredRow.objects.filter(kind=kind.name, version=kind.version, project=query.project,
                                        row__isnull=False, source_id__in=recovery_runs(query).values("pk"))
    # A row has token ids exactly when it names their tokenizer (the ids themselves are kept out of the document).
    counted = selected.aggregate(rows=Count("id"), untokenized=Count("id", filter=Q(row__tokenizer_sha256=None)),
                                 cases=Count(KeyTextTransform("case_id", "row"), distinct=True))
    for reason, count in ((NO_RUN, cases - with_runs), (NO_PROGRESS, with_runs - counted["cases"])):
        if count:
            query.notes.setdefault("left_out", {})[reason] = count
    if counted["rows"] and note_identity(query.notes, backend_for(query.project, model="")) is not None:
        if counted["untokenized"]:
            query.notes["rows_without_tokens"] = counted["untokenized"]


def _drop_rows_of_another_tokenizer(kind, project) -> int:
    """Rows whose token ids another tokenizer or chat template made are derived again (their source did not
    change, so nothing else would); returns how many it dropped. The rows checked against the current tokenizer
    are remembered (up to the highest row id seen before the check): the next export checks the newer rows only,
    unless the tokenizer changed. (Reading every row's tokenizer took 0.7 s of an export of 100k rows.)"""
    tokenized = StoredRow.objects.filter(kind=kind.name, version=kind.version, project=project,
                                         row__isnull=False).exclude(row__tokenizer_sha256=None)
    last = StoredRow.objects.filter(kind=kind.name, version=kind.version, project=project).aggregate(
        last=Max("id"))["last"] or 0
    if not tokenized.exists():
        return 0  # no row has token ids: the tokenizer need not be named (nor loaded)
    identity, _ = remembered_note(backend_for(project, model=""))  # without loading the tokenizer, once named
    named = f"{identity['tokenizer_sha256']}:{identity['chat_template_sha256']}" if identity is not None else "none"
    checked_named, _, checked_through = (stored_checks.remembered_check(kind, project, TOKENIZER_CHECKED)
                                         or "").rpartition("|")
    if checked_named == named:
        tokenized = tokenized.filter(id__gt=int(checked_through))
    if identity is not None:
        tokenized = tokenized.exclude(row__tokenizer_sha256=identity["tokenizer_sha256"],
                                      row__template_sha256=identity["chat_template_sha256"])
    dropped = tokenized.delete()[0]
    stored_checks.remember_check(kind, project, TOKENIZER_CHECKED, f"{named}|{last}")
    return dropped


TOKENIZER_CHECKED = "tokenizer"


register(ExportKind(
    # 4: labels beside completion_mask; the tokenizer's hash beside the template's; the identity in the manifest.
    # 5: cases neither replayed nor evidence-checked too (grade null), by the evidence filter's default.
    # 6: the task as the policy saw it (a builtin environment's rules and task, under the replay's step limit);
    # task_id, the split's group. 7: the token columns stored as binary (same columns and values).
    name="aed.recovery", version=7, trl_format="tokenized", schema=RECOVERY_SCHEMA,
    label=gettext_lazy("AED recovery in context (AREX-2)"),
    description="One row per run of a recovery replay: the error and its real observation kept in the prompt, the "
                "policy's continuation after it; loss only on the decisions that make progress (per message, and "
                "per token as input_ids + completion_mask under the model's chat template).",
    # Derived once per run and revision (its case's updated_at); the grade and the retry arm read (kept on the case) at export
    # time. Runs are bounded by the data version.
    stored=StoredRows(model=ReplayRun, sources=recovery_runs, derive=derive_recovery, live_columns=GRADE_COLUMNS,
                      live=live_recovery_columns, revision="replay__proposal__case__updated_at", notes=recovery_notes,
                      binary_lists=tuple(field.name for field in TOKEN_COLUMNS)),
    field_meanings=RECOVERY_MEANINGS, **COMMON))
