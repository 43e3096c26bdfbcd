"""The one way a trace step becomes chat messages, and the context every chat row starts from."""

import json

import pyarrow as pa

from ..models import Case

MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))


def chat_message(role: str, content: str) -> dict:
    return {"role": role, "content": content}


def _text(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def step_messages(step: dict, *, observation: bool = True) -> list[dict]:
    """A trace step (or a replayed one) as chat messages; every kind renders steps with this function.

    The agent's step (role "assistant", or none) is an assistant message with the step's content, or its
    action when the content is empty. A "system" or "user" step keeps its role; any other role (tool,
    environment, ...) is what the agent observed: a user message "Observation: <content>". The step's
    observation, when it has one, follows as a user message "Observation: <observation>".
    """
    role = step.get("role") or "assistant"
    content = _text(step.get("content"))
    if role == "assistant":
        messages = [chat_message("assistant", content if content.strip() else _text(step.get("action")))]
    elif role in ("system", "user"):
        messages = [chat_message(role, content)]
    else:
        messages = [chat_message("user", f"Observation: {content}")]
    if observation and _text(step.get("observation")):
        messages.append(chat_message("user", f"Observation: {_text(step['observation'])}"))
    return messages


def task_text(trace) -> str:
    """The task as the rows state it: `meta["task"]` when it is text, else the task id; then the environment."""
    task = (trace.meta or {}).get("task")
    lines = [f"Task: {task if isinstance(task, str) and task.strip() else trace.task_id}"]
    if trace.environment:
        lines.append(f"Environment: {trace.environment}")
    return "\n".join(lines)


def prefix_messages(case: Case) -> list[dict]:
    """The shared context at the checkpoint: the task, then every step before the error step.
    System steps at the very start of the trace stay first (chat templates want the system message first)."""
    steps = [message for step in case.trace.steps[:case.error_step] for message in step_messages(step)]
    lead = 0
    while lead < len(steps) and steps[lead]["role"] == "system":
        lead += 1
    return [*steps[:lead], chat_message("user", task_text(case.trace)), *steps[lead:]]


def transcript(steps: list[dict]) -> str:
    """Steps as text, one line per rendered message, each with its step's index."""
    return "\n".join(f"[{index}] {message['role']}: {message['content']}"
                     for index, step in enumerate(steps) for message in step_messages(step))
