"""Record kinds of the AED corpus: training rows made from curated error cases, one module per kind.

- `aed.diagnosis_sft` (`diagnosis`): learn to find and diagnose the first decisive error (the run up to and
  including it -> "Error step / Category / Diagnosis").
- `aed.recovery` (`recovery`): AREX-style recovery. The run keeps its error in context (the prefix, the error
  step and its observation), then continues with a passing corrected replay; `loss_mask` is 1 only on the
  recovery's assistant turns.
- `aed.preference` (`preference`): TRL `prompt` / `chosen` / `rejected`: at the checkpoint before the error
  step, the corrected action is preferred to the original one.
- `aed.pairs` (`pairs`): the full error-diagnosis record with its proposal and the replay evidence (2x2 table,
  statistics).

Chat messages are in the training shape of `dataplatform.conversations.training` (reasoning as
`reasoning_content`, tool calls and tool results as the trace recorded them); the recovery and preference rows
carry the trace's function schemas in a `tools` column, so a row goes into `apply_chat_template(messages,
tools=tools)` as it is.

Only submitted cases are exported (drafts never), graded at least `min_grade` (B by default; the grades of
`stats.GRADE_RULES`). Every chat row is rendered with the one function `rendering.step_messages`, and the
context of the recovery and preference rows with `rendering.prefix_messages`, so a preference prompt is byte
for byte the start of the recovery row of the same case. Every kind keys its rows on "case-<id>", so a case
falls in the same train/validation split in every kind.

The data version is "<highest case id>:<highest replay-run id>" of the project. Rows come from cases up to
the first bound; replay evidence (the 2x2 table, its statistics, hence the grade, and the recovery run) from
the runs up to the second, recomputed from those runs rather than read from `Replay.stats`, so a rerun of an
export writes the same evidence however many runs were recorded since. The case's own fields (diagnosis,
status, proposals) are read as they are when the rows are read.

Cases are read a page at a time (keyset on the case id, `cases.graded_pages`), with their proposals and
replays; a page's runs are read in one query (pair, arm and outcome only; the steps of the recovery run alone).
"""

from . import diagnosis, pairs, preference, recovery  # noqa: F401  (importing a kind's module registers it)
