"""tau-bench results (github sierra-research/tau-bench `tau_bench/run.py`, and its `historical_trajectories/`):
one JSON document, an array of runs `{task_id, reward, info, traj, trial}`, written indented (documents.py reads
each run as a record).

- `traj` is the conversation as the agent's model saw it, OpenAI chat with tool calls (the tool results, errors
  included, are the `tool` messages the model read); a message's other fields are kept beside it.
- The task is `task_id` (a number in the file: its text here); the outcome is the `reward`: tau-bench counts a
  run as a success when it is 1. `reward`, `info` (the task, the reward's parts, the user simulator's cost) and
  `trial` are kept in meta. A run names no model and has no id of its own.
"""

from django.utils.translation import gettext

from ..reading import Problem
from .base import TraceRecord, conversation_of, openai_messages, without

FORMAT = "tau_bench"
HARNESS = "tau-bench"


def is_run(record: dict) -> bool:
    return "traj" in record and "reward" in record


def read(record: dict) -> tuple[TraceRecord | None, list[Problem]]:
    problems: list[Problem] = []
    task_id, reward = record.get("task_id"), record.get("reward")
    if task_id is not None and (isinstance(task_id, bool) or not isinstance(task_id, int | str)):
        problems.append(("task_id", gettext("must be a number or a string")))
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, int | float)):
        problems.append(("reward", gettext("must be a number")))
    built = openai_messages(record.get("traj"), "traj")
    conversation = conversation_of(built, problems, list_path="traj")
    if problems:
        return None, problems
    return TraceRecord(FORMAT, conversation, extras=tuple(b.extras for b in built),
                       task_id="" if task_id is None else str(task_id), harness=HARNESS,
                       passed=None if reward is None else reward == 1, meta=without(record, "traj", "task_id"),
                       origins={"task_id": "task_id"}), []
