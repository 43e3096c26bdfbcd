"""The one way a trace step becomes chat messages, and the context every chat row starts from.

Messages are in the training shape (`Message.for_training()`: `reasoning_content`, tool calls with their
arguments as objects); a row holds them as `dataplatform.conversations.training` cells."""

import json

from dataplatform.conversations.model import Message
from dataplatform.conversations.reading import REASONING_KEYS, read_conversation
from dataplatform.conversations.training import MESSAGES  # noqa: F401  (every chat kind's column type)

from ..models import Case
from ..runners import ENVIRONMENTS

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


def _recorded_task(trace) -> str:
    """The task as the trace records it: `meta["task"]` (text as it is, any other value as JSON), an OpenHands
    run's `instruction`, else the task id."""
    meta = trace.meta or {}
    task = meta.get("task")
    if isinstance(task, str) and task.strip():
        return task
    if task not in (None, "", {}, []):
        return json.dumps(task, sort_keys=True, ensure_ascii=False)
    instruction = meta.get("instruction") if trace.source_format == "openhands" else None
    return instruction if isinstance(instruction, str) and instruction.strip() else trace.task_id


def task_line(trace) -> str:
    """"Task: <the task as recorded>", then "Environment: <environment>" when there is one."""
    lines = [f"Task: {_recorded_task(trace)}"]
    if trace.environment:
        lines.append(f"Environment: {trace.environment}")
    return "\n".join(lines)


def builtin_opening(trace, max_steps: int | None = None) -> list[dict] | None:
    """What a builtin environment's runner shows its policy before the first step: the environment's own chat
    (`runners.ENVIRONMENTS`' `messages`) with no history yet, the rules (system) and the task (user), under the
    step limit `max_steps` (else the environment's default: a trace does not record its own). None for a trace
    of another environment, or whose task does not read (then nothing says what its policy was shown)."""
    environment = ENVIRONMENTS.get(trace.environment)
    if environment is None:
        return None
    try:
        task = environment.task(trace)
    except environment.task_error:
        return None
    return environment.messages(task, [], int(max_steps or environment.max_steps))


def states_its_task(steps: list[dict]) -> bool:
    """The trace's own steps show the task its policy was given: a user message before the agent's first step (a
    conversation's prompt: OpenAI chat, a SWE-agent history or query, an OpenHands instruction, a trajectory)."""
    for step in steps:
        role = step.get("role") or "assistant"
        if role == "user":
            return True
        if role != "system":
            return False
    return False


def task_text(trace) -> str:
    """The task as a diagnosis row states it before the steps: what a builtin environment's policy was shown
    (the rules, then the task) and the environment; else the task line (`task_line`)."""
    opening = builtin_opening(trace)
    if opening is None:
        return task_line(trace)
    return "\n\n".join(message["content"] for message in opening) + f"\nEnvironment: {trace.environment}"


def prefix_messages(case: Case, *, max_steps: int | None = None) -> list[dict]:
    """The shared context at the checkpoint: the task as the policy saw it, then every step before the error step.

    - A builtin environment's trace starts with what its runner showed the policy (`builtin_opening`, under
      `max_steps`): the rules and the task, which its steps (actions and observations) do not hold.
    - A trace whose steps state the task (`states_its_task`) is its steps as they are.
    - Any other starts with one user message, `task_line`, after the trace's leading system steps (chat
      templates want the system message first).
    """
    trace = case.trace
    steps = [message for step in trace.steps[:case.error_step] for message in step_messages(step)]
    opening = builtin_opening(trace, max_steps)
    if opening is not None:
        return [*opening, *steps]
    if states_its_task(trace.steps):
        return steps
    lead = 0
    while lead < len(steps) and steps[lead]["role"] == "system":
        lead += 1
    return [*steps[:lead], chat_message("user", task_line(trace)), *steps[lead:]]


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
