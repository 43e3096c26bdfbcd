"""OpenAI chat with tool calls: `{messages, tools?, id?, model?, ...}`, one conversation a record, as chat
completion logs and OpenAI's fine-tuning files write it.

The messages are OpenAI's (an assistant turn's `tool_calls`, `tool` results with their `tool_call_id`, the
reasoning under any spelling `read_conversation` knows); a message's other fields (a fine-tuning file's
`weight`...) are kept beside it. `id` is the run's id, `model` its model and `instance_id` the task it
attempts (SWE trajectories in chat shape name it) when they are text; every other field of the record
(`metadata`, `parallel_tool_calls`...) is kept as meta. The format itself carries no outcome; a log that adds
one in a field `base.outcome` knows (tau-bench's `reward`, a `success` flag) gives `passed`.
"""

from ..reading import Problem
from .base import TraceRecord, conversation_of, openai_messages, outcome, text, without

FORMAT = "openai"


def read(record: dict) -> tuple[TraceRecord | None, list[Problem]]:
    problems: list[Problem] = []
    trace_id, task_id, model = (text(record, key, problems) for key in ("id", "instance_id", "model"))
    built = openai_messages(record.get("messages"), "messages")
    conversation = conversation_of(built, problems, list_path="messages", tools=record.get("tools"))
    if problems:
        return None, problems
    meta = without(record, "id", "instance_id", "model", "messages", "tools")
    passed, score, passed_from = outcome(record)
    return TraceRecord(FORMAT, conversation, extras=tuple(b.extras for b in built), trace_id=trace_id,
                       task_id=task_id, model=model, passed=passed, score=score, meta=meta,
                       origins={"trace_id": "id", "task_id": "instance_id", "model": "model", "passed": passed_from}), []
