"""OpenHands evaluation output (`output.jsonl`, github All-Hands-AI/OpenHands `evaluation/utils/shared.py`
`EvalOutput`): one instance a line, `{instance_id, instruction, history, test_result, metadata, metrics,
error, instance}`, its `history` the agent's events as `openhands/events/serialization/event.py` writes them
(an action: `action`, `args`, `source`...; an observation: `observation`, `content`, `extras`, `cause`...;
either may carry `tool_call_metadata`). Older files hold `[action, observation]` pairs instead of events.

- The `system` action is the system message, and its `args.tools` the conversation's tools; a `message`
  action is a user message (source user) or an assistant one (source agent). Images are refused.
- An action run through a tool call carries the model's response (`tool_call_metadata.model_response`): its
  message (content, `tool_calls` with the arguments exactly as the model wrote them, `reasoning_content`) is
  the assistant turn, once per response however many actions (parallel calls) it made.
- An action without that response (OpenHands before function calling, or a file that dropped it) becomes an
  assistant turn of its own: its `thought` as content and one call, `{name: the tool's name (execute_bash
  for a command), arguments: the action's args}`.
- An observation answering a call (its `tool_call_metadata`, or the `cause` of a rebuilt call) is the tool
  result, its `content` as recorded (OpenHands shows the model a few more lines, such as the exit code,
  which stay in the event's `extras`).
- Events the agent did not act through (recall of workspace context, state changes, condensation...) are
  kept in meta as `other_events`; each message keeps its events' ids, times, args and extras beside it
  (`events`), and a response its usage and model (`response`). An event's display `message` and running
  `llm_metrics` are not kept: `metrics` holds the totals.
- `instance_id` is the task; the model is `metadata.llm_config.model`, the environment `metadata.dataset`,
  and `passed` the SWE-bench evaluation's `test_result.report.resolved` when the file has been evaluated.
  Everything else is meta.
"""

from django.utils.translation import gettext

from ..reading import Problem
from .base import Built, TraceRecord, conversation_of, dig, text, without

FORMAT = "openhands"
# OpenHands' own function names for actions it ran before function calling (openhands/llm/tool_names.py).
TOOL_NAMES = {"run": "execute_bash", "run_ipython": "execute_ipython_cell"}
# Actions an agent takes through a tool; any other action is bookkeeping.
TOOL_ACTIONS = {"run", "run_ipython", "read", "write", "edit", "browse", "browse_interactive", "mcp", "delegate",
                "think", "finish", "reject", "task_tracking"}
EVENT_KEYS = ("id", "timestamp", "source", "action", "observation", "cause", "success")
IMAGE_KEYS = ("image_urls", "images_urls", "file_urls")
RESPONSE_MESSAGE = "tool_call_metadata.model_response.choices[0].message"


def read(record: dict) -> tuple[TraceRecord | None, list[Problem]]:
    problems: list[Problem] = []
    task_id = text(record, "instance_id", problems, required=True)
    history, events = _History(problems), _events(record.get("history"), problems)
    for where, event in events:
        history.add(where, event)
    # No events at all: their problem says why, and there is no conversation to read.
    conversation = conversation_of(history.built, problems, list_path="history", tools=history.tools,
                                   tools_path=history.tools_path) if events else None
    if problems:
        return None, problems
    model, environment = dig(record, "metadata", "llm_config", "model"), dig(record, "metadata", "dataset")
    resolved = dig(record, "test_result", "report", "resolved")
    meta = without(record, "instance_id", "history") | ({"other_events": history.other} if history.other else {})
    return TraceRecord(FORMAT, conversation, extras=tuple(b.extras for b in history.built), task_id=task_id,
                       model=model if isinstance(model, str) else "", harness="openhands",
                       environment=environment if isinstance(environment, str) else "",
                       passed=resolved if isinstance(resolved, bool) else None, meta=meta,
                       origins={"task_id": "instance_id", "model": "metadata.llm_config.model",
                                "environment": "metadata.dataset"}), []


def _events(history, problems: list[Problem]) -> list[tuple[str, dict]]:
    """(path, event) for each event, the pairs of older files taken apart."""
    if not isinstance(history, list) or not history:
        problems.append(("history", gettext("must be a non-empty list of events")))
        return []
    events = []
    for index, item in enumerate(history):
        if isinstance(item, dict):
            events.append((f"history[{index}]", item))
        elif isinstance(item, list) and len(item) == 2 and all(isinstance(event, dict) for event in item):
            events += [(f"history[{index}][{half}]", event) for half, event in enumerate(item)]
        else:
            problems.append((f"history[{index}]", gettext("must be an event object, or an [action, observation] pair")))
    return events


def _facts(event: dict, *read_args: str) -> dict:
    """What a message keeps of the event it came from: ids, time, source, kind, and the args not read."""
    facts = {key: event[key] for key in EVENT_KEYS if key in event}
    args = without(event["args"], *read_args) if isinstance(event.get("args"), dict) else {}
    if args:
        facts["args"] = args
    if isinstance(event.get("extras"), dict) and event["extras"]:
        facts["extras"] = event["extras"]
    return facts


class _History:
    """The messages built from the events, in order."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        self.built: list[Built] = []
        self.tools, self.tools_path = None, "tools"
        self.responses: dict[str, Built] = {}  # model response id -> its assistant turn
        self.rebuilt: dict[int, tuple[str, str]] = {}  # action event id -> (call id, tool name) of a rebuilt call
        self.other: list[dict] = []

    def add(self, where: str, event: dict) -> None:
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        if "action" in event:
            self._action(where, event, args)
        elif "observation" in event:
            self._observation(where, event)
        else:
            self.problems.append((where, gettext("must be an action (with `action`) or an observation (with `observation`)")))

    def _action(self, where: str, event: dict, args: dict) -> None:
        kind = event["action"]
        if not isinstance(kind, str):
            self.problems.append((f"{where}.action", gettext("must be the kind of action, a string such as 'run'")))
        elif kind == "system":
            self.built.append(Built({"role": "system", "content": args.get("content")}, f"{where}.args",
                                    {"events": [_facts(event, "content", "tools")]}))
            if self.tools is None and args.get("tools") is not None:
                self.tools, self.tools_path = args["tools"], f"{where}.args.tools"
        elif kind == "message":
            for key in IMAGE_KEYS:
                if args.get(key):
                    self.problems.append((f"{where}.args.{key}", gettext("images and files are not supported: the platform "
                                                                         "keeps text only and never drops part of a "
                                                                         "message")))
            role = "user" if event.get("source") == "user" else "assistant"
            self.built.append(Built({"role": role, "content": args.get("content")}, f"{where}.args",
                                    {"events": [_facts(event, "content")]}))
        elif isinstance(dig(event, "tool_call_metadata", "model_response", "choices", 0, "message"), dict):
            self._response(where, event)
        elif event.get("source") == "agent" and kind in TOOL_ACTIONS:
            self._rebuilt_call(where, event, args)
        else:
            self.other.append(event)

    def _response(self, where: str, event: dict) -> None:
        response = event["tool_call_metadata"]["model_response"]
        key = response.get("id") if isinstance(response.get("id"), str) else where
        if key in self.responses:  # another call of a response already read
            self.responses[key].extras["events"].append(_facts(event, "thought"))
            return
        choice = response["choices"][0]
        message = {**choice["message"], "role": "assistant"}
        if isinstance(choice.get("finish_reason"), str):
            message["finish_reason"] = choice["finish_reason"]
        built = Built(message, f"{where}.{RESPONSE_MESSAGE}",
                      {"events": [_facts(event, "thought")], "response": without(response, "choices")})
        self.responses[key] = built
        self.built.append(built)

    def _rebuilt_call(self, where: str, event: dict, args: dict) -> None:
        metadata = event.get("tool_call_metadata") if isinstance(event.get("tool_call_metadata"), dict) else {}
        call_id, name = metadata.get("tool_call_id"), metadata.get("function_name")
        call_id = call_id if isinstance(call_id, str) and call_id else f"call_{event.get('id', len(self.built))}"
        name = name if isinstance(name, str) and name else TOOL_NAMES.get(event["action"], event["action"])
        thought = args.get("thought")
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": without(args, "thought")}}
        self.built.append(Built({"role": "assistant", "content": thought if isinstance(thought, str) else "",
                                 "tool_calls": [call]}, f"{where}.args", {"events": [_facts(event, *args)]}))
        if isinstance(event.get("id"), int):
            self.rebuilt[event["id"]] = (call_id, name)

    def _observation(self, where: str, event: dict) -> None:
        metadata = event.get("tool_call_metadata")
        if isinstance(metadata, dict) and isinstance(metadata.get("tool_call_id"), str):
            call_id, name = metadata["tool_call_id"], metadata.get("function_name")
        elif isinstance(event.get("cause"), int) and event["cause"] in self.rebuilt:
            call_id, name = self.rebuilt[event["cause"]]
        else:
            self.other.append(event)
            return
        self.built.append(Built({"role": "tool", "tool_call_id": call_id, "name": name if isinstance(name, str) else "",
                                 "content": event.get("content")}, where, {"events": [_facts(event)]}))
