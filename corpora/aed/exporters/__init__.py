"""Record kinds of the AED corpus: training rows made from curated error cases, one module per kind.

- `aed.diagnosis_sft` (`diagnosis`): learn to find and diagnose the first decisive error (the run up to and
  including it -> "Error step / Category / Diagnosis").
- `aed.recovery` (`recovery`): AREX-2 recovery in context, from the runs of recovery replays. The run keeps its
  error and the observation it really got in context, then the policy continues; loss falls only on the
  decisions after the failure that make progress, per message (`loss_mask`) and per token (`input_ids`,
  `completion_mask` under the model's chat template).
- `aed.repair` (`repair`): TRL `prompt` / `completion`: the context up to the error step, then the corrected
  action alone.
- `aed.preference` (`preference`): TRL `prompt` / `chosen` / `rejected`: at the checkpoint before the error
  step, the corrected action is preferred to the original one.
- `aed.pairs` (`pairs`): the full error-diagnosis record with its proposal and the replay evidence (2x2 table,
  statistics).

Chat messages are in the training shape of `dataplatform.conversations.training` (reasoning as
`reasoning_content`, tool calls and tool results as the trace recorded them); the recovery and preference rows
carry the trace's function schemas in a `tools` column, so a row goes into `apply_chat_template(messages,
tools=tools)` as it is.

Only submitted cases are exported (drafts never), each with its evidence grade as it stands (`stats.GRADE_RULES`:
A or B from a replay, C from the curator's evidence check alone, D; none when neither was done). The `evidence`
filter asks for replayed cases only, for those and the evidence-checked ones, or for any (the default: ungraded
ones too), and `min_grade` for the lowest grade among graded ones (C by default: D only when asked for). The
defaults do what the AED paper's corpus did: 50,228 diagnosis pairs, of which 3,062 were replayed; diagnosis
data does not wait for a replay, the grade column says how far each case's evidence goes (`cases.DEFAULT_*`).
A case the filters match but the rows leave out is counted with its reason (`cases.leave_out`), and the
manifest's `left_out` and the dataset card say how many and why. Every chat row is rendered with the one function `rendering.step_messages`, and the
context of the recovery and preference rows with `rendering.prefix_messages`, so a preference prompt is byte
for byte the start of the recovery row of the same case (when the recovery replay ran under the environment's
default step limit, which the trace's own rows state). Every chat row states the task as the traced policy saw
it: a builtin environment's trace starts with what its runner shows the policy (the environment's rules and
task, `runners.ENVIRONMENTS`); a conversation starts with its own prompt; any other trace with the task as
recorded (`meta["task"]`, as text or JSON; else the task id).

The data version is "<highest case id>:<highest replay-run id>" of the project. Rows come from cases up to
the first bound, and recovery rows from the runs up to the second. Every AED kind is a stored kind
(`dataplatform.exports.stored`): a case's row (diagnosis, preference, repair, pairs), and a recovery run's row
(rendered and tokenized once), are derived once per revision of the case (its `updated_at`) soon after the case
is submitted or the replay finishes, and every export reads them on the fast path. The revision moves with every
edit of the case and a model's evidence check, and with what the preference, repair and pairs rows read beside
the case: a proposal added, accepted or rejected, a run of a paired replay (its table), the project's grading
rules (which pick the proposal that grades a case, and the significance level) (`services._revise_export_rows`).
The grade and retry arm are read at export time from the grades kept on the cases (`grades.regrade`, by the rules
of `stats.grade` on the replays' tables as they stand, kept by every service that moves them), and so are the grade
filters and the left-out counts; aed.pairs' curator is read in SQL.
A case is graded as it stands, not bounded by the data version's runs; so is aed.pairs' replay evidence.

A derivation reads a page of cases at a time (`cases.graded_by_ids`), with their proposals and replays; a page's
runs are read in one query (pair, arm and outcome only; the recovery runs with their steps). `cases.graded_pages`,
which graded the cases of an export as of its data version, is the old generators' (the tests' oracle).
"""

from . import diagnosis, pairs, preference, recovery, repair  # noqa: F401  (importing a kind's module registers it)
