"""The published labeler's trajectory mode: what the model sees of an agent trajectory, and which level-1
labels it keeps.

The model sees a compact summary, as the published pipeline builds it for its full L1 + L2 run: the user's
requests and the agent's actions, one line each, and the tool results that carry evidence (an error, a
test run, a write), with no system prompt, no reasoning and no tool schemas. The results of read-only tools
(reading, listing, searching files) are left out unless they mention such evidence. Each piece has a length
bound, the whole summary another (`max_trajectory_chars`): what does not fit is cut with a marker.

Stage one is kept ("preserve", the published default) when complete level-1 labels exist: the record's own
`labels` (an upstream trajectory line may carry them), else the final label of the task the trajectory
attempts; otherwise, and always with "relabel", the model answers it from the summary.
"""

import json
import re

from django.utils.translation import gettext_noop

from dataplatform.conversations.model import Conversation
from dataplatform.conversations.reading import read_conversation
from dataplatform.imports.parsers import load_json

from .autolabel import repository
from .models import L1Source
from .taxonomy import TaxonomySpec

MESSAGE_CHARS = 4_000  # one request or one assistant text
ARGUMENTS_CHARS = 2_000  # one tool call's arguments
RESULT_CHARS = 5_000  # one tool result
READ_ONLY_TOOLS = {"read", "grep", "glob", "ls", "search", "find", "view", "read_file", "list_files", "find_file",
                   "search_dir", "search_file", "open"}
EVIDENCE = re.compile(r"\b(error|failed|failure|passed|tests?|traceback|exception|exit code|build|compiled|"
                      r"written|updated|success)\b", re.IGNORECASE)
NO_REPOSITORY = ("The repository is not known: infer the domain from what the trajectory builds or changes, and end "
                 "the domain rationale with \"(metadata-absent fallback)\".")
# Names upstream files use for the level-1 rationales, beside `<field>_rationale`.
UPSTREAM_RATIONALES = {"task_type_rationale": "task_type_l1", "domain_rationale": "domain_l1",
                       "application_domain_rationale": "domain_l1"}


def _cut(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + f"... [cut at {limit} characters]"


def _arguments(arguments: str) -> str:
    """A call's arguments as compact JSON when they parse (a model may write broken JSON, or JSON nested too deep
    to walk: then as written)."""
    try:
        return json.dumps(load_json(arguments), ensure_ascii=False, separators=(",", ":"))
    except ValueError:
        return arguments


def summary(conversation: Conversation, max_chars: int) -> str:
    """The trajectory as the model reads it (module docstring)."""
    pieces: list[str] = []
    tool_names: dict[str, str] = {}
    for message in conversation.messages:
        if message.role == "user" and message.content.strip():
            pieces.append(f"[user]: {_cut(message.content, MESSAGE_CHARS)}")
        elif message.role == "assistant":
            if message.content.strip():
                pieces.append(f"[assistant]: {_cut(message.content, MESSAGE_CHARS)}")
            for call in message.tool_calls:
                tool_names[call.id] = call.name
                pieces.append(f"[tool: {call.name}] {_cut(_arguments(call.arguments), ARGUMENTS_CHARS)}")
        elif message.role == "tool" and message.content.strip():
            name = message.name or tool_names.get(message.tool_call_id, "")
            if name.lower() in READ_ONLY_TOOLS and not EVIDENCE.search(message.content):
                continue
            pieces.append(f"[tool_result: {name or 'unknown'}] {_cut(message.content, RESULT_CHARS)}")
    text = "\n\n".join(pieces)
    if len(text) > max_chars:
        text = text[:max_chars] + f"\n... [trajectory cut at {max_chars} characters]"
    return text


class Unreadable(ValueError):
    """The stored messages no longer read as a conversation (imported before they were stored normalised)."""


def describe(trajectory, settings) -> str:
    """What the model sees of a trajectory: its id, the repository of the task it attempts (if any) and its summary
    (`settings`: the project's LabelerSettings, for the size)."""
    conversation = read_conversation(trajectory.messages, trajectory.tools).conversation
    if conversation is None:
        raise Unreadable(gettext_noop("the stored messages do not read as a conversation"))  # a msgid: a label's error
    task = trajectory.task
    header = [f"Trajectory: {trajectory.trajectory_id}"]
    if task is not None:
        header += [f"Repository: {task.repo or 'unknown'}", f"Instance ID: {task.instance_id}", repository(task)]
    else:
        header.append(NO_REPOSITORY)
    return ("\n".join(header) + "\n\n<trajectory>\n" + summary(conversation, settings.max_trajectory_chars)
            + "\n</trajectory>")


def _stage_one(values: dict, spec: TaxonomySpec) -> dict | None:
    """The stage-one fields of `values`, if every one is there and valid under `spec`; else None."""
    fields = spec.stage_fields(1)
    chosen = {name: values.get(name) for name in fields}
    if any(not isinstance(value, str) or not value for value in chosen.values()):
        return None
    if any(name in fields for name in spec.validate_values(chosen, partial=True)):
        return None
    return chosen


def record_labels(extra: dict) -> dict:
    """The level-1 labels an imported trajectory line carried (`labels`, or the legacy `label_result`)."""
    for candidate in (extra.get("labels"), (extra.get("label_result") or {}).get("result")
                      if isinstance(extra.get("label_result"), dict) else None):
        if isinstance(candidate, dict):
            labels = dict(candidate)
            labels.setdefault("domain_l1", labels.get("application_domain"))
            labels.setdefault("task_type_l1", labels.get("task_type"))
            return labels
    return {}


def kept_stage_one(extra: dict, task_label: dict | None, spec: TaxonomySpec) -> tuple[dict, dict, str] | None:
    """(values, rationales, l1_source) of the level-1 labels to keep, or None when there are none complete:
    the record's own first, then the final label of its task (`task_label`: {values, rationales} or None)."""
    labels = record_labels(extra)
    values = _stage_one(labels, spec)
    if values is not None:
        rationales = {name: labels[key] for key, name in UPSTREAM_RATIONALES.items()
                      if isinstance(labels.get(key), str) and labels[key]}
        rationales |= {name: labels[f"{name}_rationale"] for name in values
                       if isinstance(labels.get(f"{name}_rationale"), str)}
        return values, rationales, L1Source.PRESERVED
    if task_label is not None:
        values = _stage_one(task_label["values"], spec)
        if values is not None:
            rationales = {name: task_label["rationales"][name] for name in values if name in task_label["rationales"]}
            return values, rationales, L1Source.TASK
    return None
