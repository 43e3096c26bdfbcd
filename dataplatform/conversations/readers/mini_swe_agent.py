"""mini-swe-agent trajectories (`<instance_id>.traj.json`, github SWE-agent/mini-swe-agent
`src/minisweagent/agents/default.py` `save`): one JSON document `{info, messages, trajectory_format}` (and
`instance_id` when a batch run saved it), `trajectory_format` `mini-swe-agent-1` (1.x) or `mini-swe-agent-1.1`
(2.x).

- The messages are exactly what the model saw and wrote, OpenAI chat: the model writes its action as a bash block
  in its text and the agent parses it out, so a turn stays as written, and the observation after it stays the
  user turn the model read (`<returncode>...`). Models that call tools (2.x's tool-call models) keep their
  `tool_calls` and `tool` results. A message's own `extra` (parsed actions, cost, the raw response...) is kept beside
  it; the reasoning is read under any spelling `read_conversation` knows (`reasoning_content`...).
- 2.x ends a run with a message of role `exit` (its status and submission), which the model never saw: it is kept
  in meta as `exit`, as are `info` and the rest of the record.
- The task is `instance_id` (else the file's name: documents.py); the model `info.config.model.model_name`;
  harness `mini-swe-agent`. A trajectory carries no test outcome.

mini-swe-agent's tests save the messages alone, as a JSON array: documents.py reads that as the conversation
`{"messages": [...]}`, which is OpenAI chat.
"""

from ..reading import Problem
from .base import MESSAGE_KEYS, Built, TraceRecord, conversation_of, dig, text, without

FORMAT = "mini_swe_agent"
HARNESS = "mini-swe-agent"
EXIT = "exit"


def is_trajectory(record: dict) -> bool:
    version = record.get("trajectory_format")
    return (isinstance(version, str) and version.startswith("mini-swe-agent")) or (
        "messages" in record and isinstance(dig(record, "info", "mini_version"), str))


def read(record: dict) -> tuple[TraceRecord | None, list[Problem]]:
    problems: list[Problem] = []
    task_id = text(record, "instance_id", problems)
    messages = record.get("messages") if isinstance(record.get("messages"), list) else []
    built, exits = [], []
    for index, message in enumerate(messages):
        if isinstance(message, dict) and message.get("role") == EXIT:
            exits.append(message)
        else:
            built.append(Built(message, f"messages[{index}]",
                               without(message, *MESSAGE_KEYS) if isinstance(message, dict) else {}))
    conversation = conversation_of(built, problems, list_path="messages")
    if problems:
        return None, problems
    model = dig(record, "info", "config", "model", "model_name")
    meta = without(record, "messages", "instance_id") | ({"exit": exits} if exits else {})
    return TraceRecord(FORMAT, conversation, extras=tuple(b.extras for b in built), task_id=task_id,
                       model=model if isinstance(model, str) else "", harness=HARNESS, meta=meta,
                       origins={"task_id": "instance_id", "model": "info.config.model.model_name"}), []
