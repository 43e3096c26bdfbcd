"""SWE-agent trajectories (`.traj`, as github SWE-agent/SWE-agent `sweagent/agent/agents.py` saves them): one
JSON object with `history` (the messages the model was shown and wrote), `trajectory` (one step per action:
thought, action, observation, the prompt `query`...), `info` (exit status, submission, model stats),
`environment` and `replay_config`.

- The conversation is `history` when the record has one: it is exactly what the model saw, demonstrations
  included. Otherwise it is built from the `trajectory` steps, after the messages of the first step's
  `query` (the prompt the model saw before its first action).
- A history can end before the trajectory does: SWE-agent's own test trajectory of 1.0
  (`tests/test_data/trajectories/.../6e44b9__sweagenttestrepo-1c2844.traj`) holds four of its five steps in
  `history`, the closing `submit` only in `trajectory`. The steps the history has no assistant turn for are
  read after it, as steps are when there is no history (their `trajectory_step` index kept beside them), so
  the model's last action is not lost in meta.
- An assistant turn with `tool_calls` (function calling, SWE-agent 1.x) keeps them as written. One without
  them (the model wrote a thought and a command as text, which SWE-agent parsed into `thought` and `action`)
  becomes its thought as content and the action as a call of a `bash` tool, `{"command": action}`: SWE-agent
  runs every command, its own tools included, in a shell. The model's whole text is kept beside it as
  `response`.
- The thought is content, not reasoning: the model wrote it in the open. The reasoning is the text of the
  turn's `thinking_blocks` (Anthropic's extended thinking).
- The observation after a call (a `tool` item, or the `user` item after a bash call) is the tool result
  answering it.
- `info`, `replay_config` and every other field are meta; with the conversation read from `history`,
  `trajectory` stays in meta too, less each step's `query` (which repeats the history). A retry loop's
  `attempts` stay in meta; its chosen attempt is the record's top level.
- A .traj names no task: `instance_id` when the record has one, else the file's name (SWE-agent names the
  file after the instance). The model is `replay_config`'s agent model. The format carries no test outcome.
"""

import json

from django.utils.translation import gettext

from dataplatform.imports import JsonProblem, load_json

from ..reading import Problem
from .base import Built, TraceRecord, conversation_of, dig, openai_messages, text, without

FORMAT = "swe_agent"
BASH = "bash"
# What a history item's own fields become (the rest are kept beside the message).
HISTORY_KEYS = ("role", "content", "tool_calls", "tool_call_ids", "thinking_blocks", "action")


def read(record: dict) -> tuple[TraceRecord | None, list[Problem]]:
    problems: list[Problem] = []
    task_id = text(record, "instance_id", problems)
    environment = text(record, "environment", problems)
    from_history = isinstance(record.get("history"), list) and bool(record["history"])
    if from_history:
        built, list_path = _history(record["history"], problems), "history"
        if isinstance(record.get("trajectory"), list):
            built += _steps_after_history(record["history"], record["trajectory"], problems)
    elif isinstance(record.get("trajectory"), list):
        built, list_path = _steps(record["trajectory"], problems), "trajectory"
    else:
        built, list_path = [], "history"  # neither: read_conversation says the list must not be empty
    conversation = conversation_of(built, problems, list_path=list_path)
    if problems:
        return None, problems
    meta = without(record, list_path, "instance_id", "environment")
    if from_history and isinstance(record.get("trajectory"), list):
        meta["trajectory"] = [without(step, "query") if isinstance(step, dict) else step
                              for step in record["trajectory"]]
    return TraceRecord(FORMAT, conversation, extras=tuple(b.extras for b in built), task_id=task_id,
                       model=_model(record.get("replay_config")), harness="swe-agent", environment=environment,
                       meta=meta, origins={"task_id": "instance_id", "environment": "environment",
                                           "model": "replay_config.agent.model.name"}), []


def _history(history: list, problems: list[Problem]) -> list[Built]:
    built, bash_pending = [], False
    for index, item in enumerate(history):
        where = f"history[{index}]"
        if not isinstance(item, dict):
            built.append(Built(item, where))  # read_conversation names it
            bash_pending = False
            continue
        message = {"role": item.get("role"), "content": item.get("content")}
        extras = without(item, *HISTORY_KEYS)
        if message["role"] == "assistant":
            bash_pending = _assistant(item, message, extras, where, problems)
        else:
            if bash_pending and message["role"] in ("user", "tool"):
                message["role"] = "tool"  # the bash call's output; read_conversation links it to the call
            elif message["role"] == "tool":
                message["tool_call_id"] = _call_id(item.get("tool_call_ids"), f"{where}.tool_call_ids", problems)
            bash_pending = False
        built.append(Built(message, where, extras))
    return built


def _assistant(item: dict, message: dict, extras: dict, where: str, problems: list[Problem]) -> bool:
    """Fill an assistant message from its history item; True when its action became a bash call."""
    reasoning, readable = _thinking(item.get("thinking_blocks"), f"{where}.thinking_blocks", problems)
    if reasoning:
        message["reasoning"] = reasoning
    if not readable:
        extras["thinking_blocks"] = item["thinking_blocks"]  # e.g. redacted blocks: kept as they are
    action, thought = item.get("action"), item.get("thought")
    bash = item.get("tool_calls") is None and isinstance(action, str) and bool(action.strip())
    if item.get("tool_calls") is not None:
        message["tool_calls"] = item["tool_calls"]
    elif bash:
        message["tool_calls"] = [{"type": "function", "function": {"name": BASH, "arguments": {"command": action}}}]
        if isinstance(thought, str):
            message["content"] = thought
            extras["response"] = item.get("content")
    if thought == message["content"]:
        extras.pop("thought", None)  # it is the content
    return bash


def _thinking(blocks, where: str, problems: list[Problem]) -> tuple[str, bool]:
    """(the text of the thinking blocks, whether every block was a readable thinking block)."""
    if blocks is None:
        return "", True
    if not isinstance(blocks, list):
        problems.append((where, gettext("must be a list of thinking blocks {type: thinking, thinking: text}")))
        return "", True
    thoughts = [block["thinking"] for block in blocks if isinstance(block, dict) and block.get("type") == "thinking"
                and isinstance(block.get("thinking"), str)]
    return "\n\n".join(thoughts), len(thoughts) == len(blocks)


def _call_id(ids, where: str, problems: list[Problem]) -> str:
    """A tool item answers one call (SWE-agent asserts it); without ids, read_conversation links it by order."""
    if ids is None:
        return ""
    if not isinstance(ids, list) or len(ids) != 1 or not isinstance(ids[0], str):
        problems.append((where, gettext("must be a list holding the one call id this result answers")))
        return ""
    return ids[0]


def _steps_after_history(history: list, trajectory: list, problems: list[Problem]) -> list[Built]:
    """The trajectory's steps the history holds no assistant turn for (each step is one turn of the agent's)."""
    taken = sum(isinstance(item, dict) and item.get("role") == "assistant" and "action" in item
                and not item.get("is_demo") for item in history)
    return _step_messages(trajectory, taken, problems, marked=True)


def _steps(trajectory: list, problems: list[Problem]) -> list[Built]:
    query = dig(trajectory, 0, "query")
    prompt = isinstance(query, list) and query and all(isinstance(m, dict) and m.get("role") for m in query)
    built = openai_messages(query, "trajectory[0].query") if prompt else []
    return built + _step_messages(trajectory, 0, problems)


def _step_messages(trajectory: list, start: int, problems: list[Problem], marked: bool = False) -> list[Built]:
    """Each step from `start` on: the model's thought and its action as a bash call, then the action's output;
    `marked`, each message keeps the index of its step."""
    built = []
    for index, step in enumerate(trajectory[start:], start=start):
        where = f"trajectory[{index}]"
        if not isinstance(step, dict):
            problems.append((where, gettext("must be an object with thought, action and observation")))
            continue
        thought, action, observation, response = (text(step, key, problems, where=f"{where}.{key}")
                                                  for key in ("thought", "action", "observation", "response"))
        extras = without(step, "thought", "action", "observation", "response", "query")
        mark = {"trajectory_step": index} if marked else {}
        extras |= mark
        if response and response != thought:
            extras["response"] = response
        assistant = {"role": "assistant", "content": thought or response}
        if action.strip():
            assistant["tool_calls"] = [{"type": "function",
                                        "function": {"name": BASH, "arguments": {"command": action}}}]
        built.append(Built(assistant, where, extras))
        if action.strip():
            built.append(Built({"role": "tool", "content": observation}, where, dict(mark)))
    return built


def _model(replay_config) -> str:
    """The agent's model name from `replay_config` (SWE-agent writes the run's config there as JSON text)."""
    if isinstance(replay_config, str):
        try:
            replay_config = load_json(replay_config)
        except (json.JSONDecodeError, JsonProblem):
            return ""
    name = dig(replay_config, "agent", "model", "name")
    return name if isinstance(name, str) else ""
