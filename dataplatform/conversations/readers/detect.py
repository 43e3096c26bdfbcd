"""Which trace format a record is in, told from its keys, and the reader of each format.

- `json_content`: the SWE Labeler's (its messages as JSON text);
- `history` of events (objects with `action` or `observation`, or [action, observation] pairs): OpenHands;
- `history` of messages, or only `trajectory` steps: SWE-agent;
- `entries` (a session log documents.py read whole): a Claude Code session or a Codex CLI rollout, told by its
  first entry;
- `traj` with a `reward`: a tau-bench run;
- `messages` with a `trajectory_format` of mini-swe-agent's (or its `info.mini_version`): mini-swe-agent;
- `messages` with `trajectory_id`, `request_id` or `scaffold`: the SWE Labeler's;
- any other `messages`: OpenAI chat.
"""

from django.utils.translation import gettext, gettext_noop

from ..reading import Problem
from . import claude_code, codex, mini_swe_agent, openai, openhands, swe_agent, swe_labeler, tau_bench
from .base import TraceRecord

READERS = {reader.FORMAT: reader.read for reader in (openai, swe_agent, openhands, swe_labeler, claude_code, codex,
                                                     mini_swe_agent, tau_bench)}
FORMATS = tuple(READERS)
LABELER_KEYS = ("trajectory_id", "request_id", "scaffold")
UNKNOWN = gettext_noop("a trace is one of: OpenAI chat {messages, tools?}, a SWE-agent trajectory {history and/or trajectory, "
           "info}, an OpenHands output line {instance_id, history of events}, a SWE Labeler trajectory "
           "{trajectory_id, messages or json_content}, a mini-swe-agent trajectory {info, messages, "
           "trajectory_format}, a tau-bench run {task_id, reward, traj}, or a whole Claude Code session or Codex "
           "CLI rollout file")


def detect(record: dict) -> str | None:
    """The format's name (a key of READERS), or None for a record in none of them."""
    if "json_content" in record:
        return swe_labeler.FORMAT
    history = record.get("history")
    if isinstance(history, list) and history:
        first = history[0]
        events = isinstance(first, list) or (isinstance(first, dict) and ("action" in first or "observation" in first))
        return openhands.FORMAT if events else swe_agent.FORMAT
    if "trajectory" in record or "history" in record:
        return swe_agent.FORMAT
    entries = record.get("entries")
    if isinstance(entries, list) and entries and isinstance(entries[0], dict):
        return claude_code.FORMAT if claude_code.is_entry(entries[0]) else codex.FORMAT if codex.is_line(entries[0]) else None
    if tau_bench.is_run(record):
        return tau_bench.FORMAT
    if mini_swe_agent.is_trajectory(record):
        return mini_swe_agent.FORMAT
    if "messages" in record:
        return swe_labeler.FORMAT if any(key in record for key in LABELER_KEYS) else openai.FORMAT
    return None


def read_trace(record: dict, *, task_id: str = "") -> tuple[TraceRecord | None, list[Problem]]:
    """Read `record` with the reader of its format. `task_id`: the task to name when the record names none
    (a .traj file is named after its instance: `documents.document_name`)."""
    found = detect(record)
    if found is None:
        return None, [("(line)", gettext(UNKNOWN))]
    trace, problems = READERS[found](record)
    return (trace.named(task_id) if trace else None), problems
