"""What the columns of the labeler's record kinds (`exporters.py`) mean: their dataset cards' Fields tables and the
export-kinds API. The task and label columns are shared by swe.labels, swe.pooled, swe.routed and swe.balanced;
swe.trajectories has the label columns, swe.upstream some of each."""

from dataplatform.conversations.training import TOOLS_MEANINGS

# TASK_COLUMNS: the task as imported.
TASK_MEANINGS = {
    "instance_id": "The task's instance id (SWE-bench style, e.g. owner__repo-1234), unique in the project.",
    "task_id": "The task's id on the platform.",
    "repo": "The repository, owner/name; empty when the record had none.",
    "base_commit": "The commit the task's patches apply to.",
    "problem_statement": "The issue the task states, as text.",
    "patch": "The reference patch that resolves the task (a unified diff).",
    "test_patch": "The patch adding or changing the tests that check the fix (a unified diff).",
    "fail_to_pass": "Tests that fail before the patch and pass after it.",
    "pass_to_pass": "Tests that pass both before and after the patch.",
}

# LABEL_COLUMNS: the final label as of the export's data version (the newest submitted reviewer label, else the
# model's); a field is unset when there is no label or the label lacks it.
LABEL_MEANINGS = {
    "taxonomy": "The name of the taxonomy the label is read under (the export's taxonomy filter, else the "
                "project's pinned one).",
    "taxonomy_version": "The version of that taxonomy.",
    "category": "The category expert the label routes to (e.g. A, B, C), by the taxonomy's routing of its level-1 "
                "family; unassigned when no category takes it or there is no label.",
    "review_status": "reviewed (a reviewer's submitted label), auto (the model's, not reviewed), error (the "
                     "model's answer stayed invalid after its retry) or unlabeled.",
    "label_origin": "Whose label it is: human (a reviewer's) or model; null when there is none.",
    "reviewer": "Username of the reviewer whose label it is; null for the model's label or none.",
    "model_id": "The model that made the label, or that a reviewer's label was pre-filled from; empty when a "
                "reviewer started from nothing, null when there is no label.",
    "task_type_l1": "The task-type family (level 1): the main intent of the work, e.g. bug-fix; null when unset.",
    "domain_l1": "The domain family (level 1): what the repository's software is primarily for; null when unset.",
    "code_language": "The programming language most central to the task, e.g. python or js/ts; null when unset.",
    "task_spec_type": "How fully the task statement pins down a correct solution: fuzzy or specific; null when unset.",
    "dependency_context": "What the solver needs besides the statement (codebase, env, codebase+env or none); "
                          "null when unset.",
    "scope": "How widely the resolving patch spreads, tests aside, from one file to several repositories (the "
             "taxonomy's choice, e.g. single_file); null when unset.",
    "cognitive_complexity": "How much reasoning the right change takes (the taxonomy's choice, e.g. mechanical); "
                            "null when unset.",
    "time_estimate": "Rough effort for a developer who knows the codebase (the taxonomy's choice, e.g. small_1h); "
                     "null when unset.",
    "task_type_l2": "The task-type tags (level 2) under task_type_l1; empty when none.",
    "domain_l2": "The domain tags (level 2) under domain_l1; empty when none.",
    "values_json": "Every field of the label as JSON {field: slug or [slugs]}, also those of a taxonomy of another "
                   "shape; {} when there is no label.",
    "rationales_json": "The model's one-line reason for each field, as JSON {field: text}; {} when none.",
    "provenance_json": "Who set each field's current value, as JSON {field: model or human}; {} when there is no "
                       "label.",
}

TASK_LABEL_MEANINGS = {**TASK_MEANINGS, **LABEL_MEANINGS}

TRAJECTORY_MEANINGS = {
    "trajectory_id": "The trajectory's id as imported, unique in the project.",
    "instance_id": "The task instance the trajectory attempts; empty when the record names none. The split's group: "
                   "all trajectories of one task are in the same split (one of no known task is a group of its own).",
    "task_id": "That task's id on the platform; null when the project has no such task.",
    "model": "The model that acted as the agent; empty when the record did not say.",
    "scaffold": "The agent scaffold that ran it; empty when the record did not say.",
    "source_format": "The format it was read from, e.g. openai, swe_agent, openhands or swe_labeler.",
    "messages": "The trajectory as chat messages: reasoning, tool calls and tool results included.",
    **TOOLS_MEANINGS,
    "label_subject": "Whose label the label columns hold: trajectory (its own), task (its task's, when it has none "
                     "of its own) or null (neither has one).",
    "l1_source": "Where the trajectory label's level-1 values came from: generated, relabeled, preserved (the "
                 "record's own labels) or task (its task's label); null when the label is not the trajectory's.",
    **LABEL_MEANINGS,
}

# The published labeler's fields that the record as imported may carry (null when it does not).
UPSTREAM_MEANINGS = {
    **{name: TASK_MEANINGS[name] for name in ("instance_id", "repo", "problem_statement", "patch", "test_patch",
                                              "base_commit", "task_id")},
    "dataset_source": "The dataset the task came from, as the imported record names it; null when it does not.",
    "hints_text": "The record's hints (in SWE-bench, the issue's comments before the fix); null when it has none.",
    "language": "The record's own language field; null when it has none.",
    "created_at": "When the task was created, as text as the imported record gives it; null when it does not.",
    "repo_description": "The repository's description, from the imported record; null when it has none.",
    "repo_topics": "The repository's topics, from the imported record; null when it has none.",
    "repo_primary_language": "The repository's main language, from the imported record; null when it has none.",
    "labels": "The final label in the published labeler's LabelResult shape: its values, the rationales of the "
              "task-type and domain fields (empty when none) and raw_response (always empty here).",
    **{name: LABEL_MEANINGS[name] for name in ("category", "review_status")},
}
