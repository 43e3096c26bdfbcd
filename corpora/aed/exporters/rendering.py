"""The one way a trace step becomes chat messages, and the context every chat row starts from.

Messages are in the training shape (`Message.for_training()`: `reasoning_content`, tool calls with their
arguments as objects); a row holds them as `dataplatform.conversations.training` cells."""

import json

from dataplatform.conversations.model import Message
from dataplatform.conversations.reading import REASONING_KEYS, read_conversation
from dataplatform.conversations.training import MESSAGES  # noqa: F401  (every chat kind's column type)

from ..models import Case

# The fields of a step that is a trajectory's message (dataplatform.conversations.model).
MESSAGE_KEYS = ("role", "content", *REASONING_KEYS, "tool_calls", "tool_call_id", "name")


def chat_message(role: str, content: str) -> dict:
    return {"role": role, "content": content}


def _text(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _as_message(step: dict) -> Message | None:
    """A step that is a trajectory's message with more than text (reasoning, tool calls, a tool result), read
    as one; None for any other step, or one whose message fields do not read."""
    if not any(step.get(key) for key in (*REASONING_KEYS, "tool_calls", "tool_call_id")):
        return None
    read = read_conversation([{key: step[key] for key in MESSAGE_KEYS if key in step}])
    return read.conversation.messages[0] if read.conversation else None


def step_messages(step: dict, *, observation: bool = True) -> list[dict]:
    """A trace step (or a replayed one) as chat messages; every kind renders steps with this function.

    A trajectory's message with reasoning, tool calls or a tool result is that message, in the training
    shape. Otherwise the agent's step (role "assistant", or none) is an assistant message with the step's
    content, or its action (or its calls, as JSON) when the content is empty. A "system" or "user" step
    keeps its role; any other role (tool, environment, ...) is what the agent observed: a user message
    "Observation: <content>". The step's observation, when it has one, follows as a user message
    "Observation: <observation>".
    """
    role = step.get("role") or "assistant"
    content = _text(step.get("content"))
    message = _as_message(step)
    if message is not None:
        messages = [message.for_training()]
    elif role == "assistant":  # with calls that do not read (an old `messages` line), they are its text
        messages = [chat_message("assistant", content if content.strip()
                                 else _text(step.get("action") or step.get("tool_calls")))]
    elif role in ("system", "user"):
        messages = [chat_message(role, content)]
    else:
        messages = [chat_message("user", f"Observation: {content}")]
    if observation and _text(step.get("observation")):
        messages.append(chat_message("user", f"Observation: {_text(step['observation'])}"))
    return messages


def error_step_end(case: Case) -> int:
    """Where the case's error step ends: after the step and, in a trajectory (one step per message), after the
    tool results answering its calls, which are its observation."""
    steps, end = case.trace.steps, case.error_step + 1
    calls = {call.get("id") for call in steps[case.error_step].get("tool_calls") or [] if isinstance(call, dict)}
    while end < len(steps) and steps[end].get("role") == "tool" and steps[end].get("tool_call_id") in calls:
        end += 1
    return end


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
    """Steps as text, one line per rendered message (and per reasoning and tool call), each with its step's index."""
    return "\n".join(line for index, step in enumerate(steps) for message in step_messages(step)
                     for line in _lines(index, message))


def _lines(index: int, message: dict):
    role, calls = message["role"], message.get("tool_calls", [])
    if message.get("reasoning_content"):
        yield f"[{index}] {role} reasoning: {message['reasoning_content']}"
    if message["content"] or not calls:
        yield f"[{index}] {role}: {message['content']}"
    for call in calls:
        yield f"[{index}] {role} calls {call['function']['name']}({_text(call['function']['arguments'])})"
