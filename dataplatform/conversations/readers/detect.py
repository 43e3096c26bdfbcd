"""Which trace format a record is in, told from its keys, and the reader of each format.

- `json_content`: the SWE Labeler's (its messages as JSON text);
- `history` of events (objects with `action` or `observation`, or [action, observation] pairs): OpenHands;
- `history` of messages, or only `trajectory` steps: SWE-agent;
- `messages` with `trajectory_id`, `request_id` or `scaffold`: the SWE Labeler's;
- any other `messages`: OpenAI chat.
"""

from django.utils.translation import gettext, gettext_noop

from ..reading import Problem
from . import openai, openhands, swe_agent, swe_labeler
from .base import TraceRecord

READERS = {reader.FORMAT: reader.read for reader in (openai, swe_agent, openhands, swe_labeler)}
FORMATS = tuple(READERS)
LABELER_KEYS = ("trajectory_id", "request_id", "scaffold")
UNKNOWN = gettext_noop("a trace is one of: OpenAI chat {messages, tools?}, a SWE-agent trajectory {history and/or trajectory, "
           "info}, an OpenHands output line {instance_id, history of events}, a SWE Labeler trajectory "
           "{trajectory_id, messages or json_content}")


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
