"""OpenHands output (`output.jsonl`), in each generation its tools wrote: one run a line, its `history` the
agent's events.

- Evaluation output of 2025 (`evaluation/utils/shared.py` `EvalOutput`): `{instance_id, instruction, history,
  test_result, metadata, metrics, error, instance}`, each event as `openhands/events/serialization/event.py`
  writes it (an action: `action`, `args`, `source`...; an observation: `observation`, `content`, `extras`,
  `cause`...; either may carry `tool_call_metadata`).
- Evaluation output of 2024: `[action, observation]` pairs of such events; a benchmark's own id (`id`) in place
  of `instance_id`, its result in `test_result.result`, the model in `metadata.model_name`.
- The resolver's output (`openhands/resolver`): `{issue: {owner, repo, number...}, instruction, history,
  success...}`, its events flat (each action's args and each observation's extras beside `action` or
  `observation`) and without `source`, ids or causes.

How events become messages:

- The `system` action is the system message, and its `args.tools` the conversation's tools; a `message` action
  is a user message (source user) or an assistant one (source agent). The resolver's events name no source:
  its first message is the task (the user's), a later one the agent's. Images are refused.
- An action run through a tool call carries the model's response (`tool_call_metadata.model_response`): its
  message (content, `tool_calls` with the arguments exactly as the model wrote them, `reasoning_content`) is
  the assistant turn, once per response however many actions (parallel calls) it made.
- An action without that response (OpenHands before function calling, or a file that dropped it) becomes an
  assistant turn of its own: its `thought` as content and one call, `{name: the tool's name (execute_bash
  for a command), arguments: the action's args}`.
- An observation answering a call (its `tool_call_metadata`, the `cause` of a rebuilt call, or, in files that
  record no links, the action right before it) is the tool result, its `content` as recorded (OpenHands shows
  the model a few more lines, such as the exit code, which stay in the event's `extras`).
- An `error` (or `user_rejected`) observation answering no call is what OpenHands showed the model as a user
  turn (a malformed call it refused, for instance): it is that user turn, its `content` as recorded (OpenHands
  adds the line "[Error occurred in processing last action]").
- Events the agent did not act through or see as a turn (recall of workspace context, state changes, null
  observations, condensation...) are kept in meta as `other_events`, and counted per kind (`outside`); each
  message keeps its events' ids, times, args and extras beside it (`events`), and a response its usage and
  model (`response`). An event's display `message` and running `llm_metrics` are not kept: `metrics` holds
  the totals.
- The task is `instance_id`, else `id`, else the resolver's issue (`<owner>/<repo>#<number>`); a run may name
  none. The model is `metadata.llm_config.model` (or `metadata.model_name`), the environment
  `metadata.dataset`, and `passed` the first outcome the record states (`base.outcome`: SWE-bench's
  `test_result.report.resolved`, a benchmark's `test_result.result`, the resolver's `success`). Everything
  else is meta.
"""

from collections import Counter

from django.utils.translation import gettext

from ..reading import Problem
from .base import Built, TraceRecord, conversation_of, dig, outcome, text, without

FORMAT = "openhands"
# OpenHands' own function names for actions it ran before function calling (openhands/llm/tool_names.py).
TOOL_NAMES = {"run": "execute_bash", "run_ipython": "execute_ipython_cell"}
# Actions an agent takes through a tool; any other action is bookkeeping.
TOOL_ACTIONS = {"run", "run_ipython", "read", "write", "edit", "browse", "browse_interactive", "mcp", "delegate",
                "think", "finish", "reject", "task_tracking"}
# Observations OpenHands shows the model as a user turn when they answer no call (openhands/memory/
# conversation_memory.py): an error, a rejection by the user.
USER_TURN_OBSERVATIONS = {"error", "user_rejected"}
EVENT_KEYS = ("id", "timestamp", "source", "action", "observation", "cause", "success")
# What an event carries besides its own args or extras; in a flat event every other key is one of those.
NOT_FLAT = (*EVENT_KEYS, "message", "tool_call_metadata", "llm_metrics", "timeout")
IMAGE_KEYS = ("image_urls", "images_urls", "file_urls")
RESPONSE_MESSAGE = "tool_call_metadata.model_response.choices[0].message"


def read(record: dict) -> tuple[TraceRecord | None, list[Problem]]:
    problems: list[Problem] = []
    task_id, task_key = _task(record, problems)
    history, events = _History(problems), _events(record.get("history"), problems)
    for where, event in events:
        history.add(where, event)
    # No events at all: their problem says why, and there is no conversation to read.
    conversation = conversation_of(history.built, problems, list_path="history", tools=history.tools,
                                   tools_path=history.tools_path, actions=history.actions) if events else None
    if problems:
        return None, problems
    model_path = ("llm_config", "model") if dig(record, "metadata", "llm_config", "model") else ("model_name",)
    model, environment = dig(record, "metadata", *model_path), dig(record, "metadata", "dataset")
    passed, score, passed_from = outcome(record)
    read_keys = ("history",) if task_key == "issue" else ("history", task_key)  # the title and body stay
    meta = without(record, *read_keys) | ({"other_events": history.other} if history.other else {})
    return TraceRecord(FORMAT, conversation, extras=tuple(b.extras for b in history.built), task_id=task_id,
                       model=model if isinstance(model, str) else "", harness="openhands",
                       environment=environment if isinstance(environment, str) else "", passed=passed, score=score,
                       meta=meta, outside=dict(history.outside),
                       origins={"task_id": task_key if task_key != "issue" else "issue.number",
                                "model": ".".join(("metadata", *model_path)), "environment": "metadata.dataset",
                                "passed": passed_from}), []


def _task(record: dict, problems: list[Problem]) -> tuple[str, str]:
    """(the task, the record's key it is read from): `instance_id`, else `id`, else the resolver's issue."""
    if record.get("instance_id") is not None:
        return text(record, "instance_id", problems, required=True), "instance_id"
    if isinstance(record.get("id"), str | int) and not isinstance(record["id"], bool) and str(record["id"]).strip():
        return str(record["id"]), "id"
    number, owner, repo = (dig(record, "issue", key) for key in ("number", "owner", "repo"))
    if isinstance(number, int | str) and not isinstance(number, bool):
        return (f"{owner}/{repo}#{number}" if isinstance(owner, str) and isinstance(repo, str) else f"#{number}"), "issue"
    return "", "instance_id"


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


def _own(event: dict, key: str) -> dict:
    """An event's `args` (key "args") or `extras` (key "extras"); a flat event's own fields stand in for them."""
    if key in event:
        return event[key] if isinstance(event[key], dict) else {}
    return without(event, *NOT_FLAT, "content") if key == "extras" else without(event, *NOT_FLAT)


def _facts(event: dict, args: dict, *read_args: str) -> dict:
    """What a message keeps of the event it came from: ids, time, source, kind, and the args not read."""
    facts = {key: event[key] for key in EVENT_KEYS if key in event}
    args = without(args, *read_args)
    if args:
        facts["args"] = args
    if "observation" in event and _own(event, "extras"):
        facts["extras"] = _own(event, "extras")
    return facts


class _History:
    """The messages built from the events, in order."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        self.built: list[Built] = []
        self.tools, self.tools_path = None, "tools"
        self.responses: dict[str, Built] = {}  # model response id -> its assistant turn
        self.rebuilt: dict[int, tuple[str, str]] = {}  # action event id -> (call id, tool name) of a rebuilt call
        self.unanswered: tuple[str, str] | None = None  # the rebuilt call just made, for files that record no links
        self.other: list[dict] = []
        self.outside: Counter = Counter()  # "<kind> action" / "<kind> observation" -> events kept in meta
        self.actions = 0  # the agent's actions: the assistant turns cannot all be empty when there are some

    def add(self, where: str, event: dict) -> None:
        if "action" in event:
            self._action(where, event, _own(event, "args"))
        elif "observation" in event:
            self._observation(where, event)
        else:
            self.problems.append((where, gettext("must be an action (with `action`) or an observation (with `observation`)")))

    def _keep_outside(self, event: dict, kind: str) -> None:
        self.other.append(event)
        self.outside[kind] += 1

    def _action(self, where: str, event: dict, args: dict) -> None:
        kind = event["action"]
        self.unanswered = None
        args_path = f"{where}.args" if "args" in event else where
        if not isinstance(kind, str):
            self.problems.append((f"{where}.action", gettext("must be the kind of action, a string such as 'run'")))
            return
        by_agent = event.get("source", "agent") == "agent"
        if by_agent and kind not in ("system", "message"):
            self.actions += 1
        if kind == "system":
            self.built.append(Built({"role": "system", "content": args.get("content")}, args_path,
                                    {"events": [_facts(event, args, "content", "tools")]}))
            if self.tools is None and args.get("tools") is not None:
                self.tools, self.tools_path = args["tools"], f"{args_path}.tools"
        elif kind == "message":
            for key in IMAGE_KEYS:
                if args.get(key):
                    self.problems.append((f"{args_path}.{key}", gettext("images and files are not supported: the "
                                                                        "platform keeps text only and never drops "
                                                                        "part of a message")))
            role = self._message_role(event)
            self.actions += role == "assistant"
            self.built.append(Built({"role": role, "content": args.get("content")}, args_path,
                                    {"events": [_facts(event, args, "content")]}))
        elif isinstance(dig(event, "tool_call_metadata", "model_response", "choices", 0, "message"), dict):
            self._response(where, event, args)
        elif by_agent and kind in TOOL_ACTIONS:
            self._rebuilt_call(args_path, event, args)
        else:
            self._keep_outside(event, f"{kind} action")

    def _message_role(self, event: dict) -> str:
        if "source" in event:
            return "user" if event["source"] == "user" else "assistant"
        # The resolver's events name no source: the run opens with the task, any later message is the agent's.
        return "assistant" if any(b.message.get("role") == "user" for b in self.built) else "user"

    def _response(self, where: str, event: dict, args: dict) -> None:
        response = event["tool_call_metadata"]["model_response"]
        key = response.get("id") if isinstance(response.get("id"), str) else where
        if key in self.responses:  # another call of a response already read
            self.responses[key].extras["events"].append(_facts(event, args, "thought"))
            return
        choice = response["choices"][0]
        message = {**choice["message"], "role": "assistant"}
        if isinstance(choice.get("finish_reason"), str):
            message["finish_reason"] = choice["finish_reason"]
        built = Built(message, f"{where}.{RESPONSE_MESSAGE}",
                      {"events": [_facts(event, args, "thought")], "response": without(response, "choices")})
        self.responses[key] = built
        self.built.append(built)

    def _rebuilt_call(self, args_path: str, event: dict, args: dict) -> None:
        metadata = event.get("tool_call_metadata") if isinstance(event.get("tool_call_metadata"), dict) else {}
        call_id, name = metadata.get("tool_call_id"), metadata.get("function_name")
        call_id = call_id if isinstance(call_id, str) and call_id else f"call_{event.get('id', len(self.built))}"
        name = name if isinstance(name, str) and name else TOOL_NAMES.get(event["action"], event["action"])
        thought = args.get("thought")
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": without(args, "thought")}}
        self.built.append(Built({"role": "assistant", "content": thought if isinstance(thought, str) else "",
                                 "tool_calls": [call]}, args_path, {"events": [_facts(event, args, *args)]}))
        if isinstance(event.get("id"), int):
            self.rebuilt[event["id"]] = (call_id, name)
        self.unanswered = (call_id, name)

    def _observation(self, where: str, event: dict) -> None:
        metadata, kind = event.get("tool_call_metadata"), event["observation"]
        unanswered, self.unanswered = self.unanswered, None
        if isinstance(metadata, dict) and isinstance(metadata.get("tool_call_id"), str):
            call_id, name = metadata["tool_call_id"], metadata.get("function_name")
        elif isinstance(event.get("cause"), int) and event["cause"] in self.rebuilt:
            call_id, name = self.rebuilt[event["cause"]]
        elif unanswered and kind != "null" and "cause" not in event and "id" not in event:
            call_id, name = unanswered  # a file that records no links: the observation answers the action before it
        elif kind in USER_TURN_OBSERVATIONS:
            self.built.append(Built({"role": "user", "content": event.get("content")}, where,
                                    {"events": [_facts(event, {})]}))
            return
        else:
            self._keep_outside(event, f"{kind} observation")
            return
        self.built.append(Built({"role": "tool", "tool_call_id": call_id, "name": name if isinstance(name, str) else "",
                                 "content": event.get("content")}, where, {"events": [_facts(event, {})]}))
