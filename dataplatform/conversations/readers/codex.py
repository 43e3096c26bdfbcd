"""Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`, github openai/codex
`codex-rs/core/src/rollout/`), one line an item; documents.py reads such a file as one record, `{"entries": [...]}`.
Rollouts since 0.4x write `{timestamp, type, payload}` lines (`session_meta`, `response_item`, `turn_context`,
`event_msg`, `compacted`); older ones a first line `{id, timestamp, instructions, git?}`, then the response items
themselves and `{record_type: state}` lines.

- A response item is what the model saw or wrote (OpenAI's Responses API items): a `message` is a turn of its
  role (`developer` read as system, the role kept beside it as `role_in_source`); its `input_text`/`output_text`
  parts are its text, and any other part (an image) is refused by name.
- The model's items of one response make one assistant turn: its `reasoning` items are the reasoning (their
  `content` text when the file has it, else their `summary` text, the encrypted content kept beside the turn),
  its `message` the content, each `function_call` a call with its arguments as written, a `custom_tool_call`
  (apply_patch) a call whose arguments are its raw `input`, a `local_shell_call` a call of `local_shell` with its
  `action`. A turn ends at the first item that is not the model's (an output, a user message); reasoning after the
  turn's text or calls, or text after its calls, starts the next one.
- A `function_call_output` (or `custom_tool_call_output`) is the tool result answering its `call_id`, its output
  as the model got it (text; older rollouts' `{"output", "metadata"}` JSON text as it is).
- `event_msg` (the interface's copies of the turns, token counts, task start and end), `turn_context`,
  `compacted`, web searches and any other items are no turns: they are kept in meta as `other_events`, and the
  session's meta as `session_meta`.
- The run's id is the session's id; the model the last `turn_context`'s (else the session's); harness `codex`. A
  rollout names no task and no outcome.
"""

import json

from django.utils.translation import gettext

from ..reading import Problem
from .base import Built, TraceRecord, conversation_of, without

FORMAT = "codex"
HARNESS = "codex"
LINE_TYPES = ("session_meta", "response_item", "event_msg", "turn_context", "compacted")
ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
TEXT_PARTS = ("input_text", "output_text", "text")
CALLS = ("function_call", "custom_tool_call", "local_shell_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output")


def is_line(data: dict) -> bool:
    """Whether a JSON line is a line of a Codex rollout (either generation)."""
    if data.get("type") in LINE_TYPES and "payload" in data:
        return True
    return "record_type" in data or {"id", "timestamp", "instructions"} <= data.keys()


def read(record: dict) -> tuple[TraceRecord | None, list[Problem]]:
    problems: list[Problem] = []
    entries = record.get("entries")
    if not isinstance(entries, list) or not entries:
        return None, [("entries", gettext("must be a non-empty list of rollout lines"))]
    rollout = _Rollout(problems)
    for index, line in enumerate(entries):
        if not isinstance(line, dict):
            problems.append((f"entries[{index}]", gettext("must be an object: a line of the rollout")))
        elif line.get("type") in LINE_TYPES and "payload" in line:
            rollout.add(index, line["type"], line["payload"], f"entries[{index}].payload", line)
        elif index == 0 and {"id", "timestamp", "instructions"} <= line.keys():
            rollout.add(index, "session_meta", line, f"entries[{index}]", line)
        elif "record_type" in line:
            rollout.other.append(line)
        else:
            rollout.add(index, "response_item", line, f"entries[{index}]", line)
    conversation = conversation_of(rollout.built, problems, list_path="entries") if not problems else None
    if problems:
        return None, problems
    session = rollout.session or {}
    trace_id = session.get("id") if isinstance(session.get("id"), str) else ""
    meta = {key: value for key, value in (("session_meta", rollout.session), ("other_events", rollout.other)) if value}
    return TraceRecord(FORMAT, conversation, extras=tuple(b.extras for b in rollout.built), trace_id=trace_id,
                       model=rollout.model[0], harness=HARNESS, meta=meta,
                       origins={"trace_id": f"{rollout.session_at}.id", "model": rollout.model[1]}), []


class _Rollout:
    """The messages built from the rollout's lines, in order."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        self.built: list[Built] = []
        self.turn: Built | None = None  # the assistant turn the model's next item joins
        self.names: dict[str, str] = {}  # call id -> tool name
        self.other: list[dict] = []
        self.session, self.session_at, self.model = None, "entries[0]", ("", "")

    def add(self, index: int, kind: str, item, where: str, line: dict) -> None:
        if not isinstance(item, dict):
            self.problems.append((where, gettext("must be an object")))
        elif kind == "session_meta" and self.session is None:
            self.session, self.session_at = item, where
            self._model(item, where)
        elif kind == "response_item":
            self._item(item, where, without(line, "payload", "type") if line is not item else {}, line)
        else:
            if kind == "turn_context":
                self._model(item, where)
            self.other.append(line)

    def _model(self, item: dict, where: str) -> None:
        if isinstance(item.get("model"), str) and item["model"]:
            self.model = (item["model"], f"{where}.model")

    def _item(self, item: dict, where: str, facts: dict, line: dict) -> None:
        kind = item.get("type")
        own = without(item, "type", "role", "content", "summary", "name", "arguments", "input", "call_id", "output",
                      "action") | facts
        if kind == "message" and item.get("role") != "assistant":
            self.turn = None
            role = item.get("role")
            message = {"role": ROLES.get(role, role), "content": self._text(item.get("content"), f"{where}.content")}
            extras = own | ({"role_in_source": role} if ROLES.get(role, role) != role else {})
            self.built.append(Built(message, where, extras))
        elif kind == "message":
            turn = self._open(lambda m: m["content"] or m["tool_calls"], where)
            turn.message["content"] += self._text(item.get("content"), f"{where}.content")
            turn.extras["items"].append(own)
        elif kind == "reasoning":
            turn = self._open(lambda m: m["reasoning"] or m["content"] or m["tool_calls"], where)
            turn.message["reasoning"] = self._reasoning(item, where, turn.message["reasoning"])
            turn.extras["items"].append(own | {"type": kind})
        elif kind in CALLS:
            self._call(kind, item, where, own)
        elif kind in OUTPUTS:
            self.turn = None
            call_id = item.get("call_id") if isinstance(item.get("call_id"), str) else ""
            output, extras = item.get("output"), own
            if isinstance(output, dict) and isinstance(output.get("content"), str):  # {content, success}
                output, extras = output["content"], own | {"output": without(output, "content")}
            content = output if isinstance(output, str) or output is None else self._text(output, f"{where}.output")
            self.built.append(Built({"role": "tool", "tool_call_id": call_id, "name": self.names.get(call_id, ""),
                                     "content": content}, where, extras | {"type": kind}))
        else:
            self.other.append(line)

    def _open(self, full, where: str) -> Built:
        """The open assistant turn, or a new one when `full(message)` says the item starts the next."""
        if self.turn is None or full(self.turn.message):
            self.turn = Built({"role": "assistant", "content": "", "reasoning": "", "tool_calls": []}, where,
                              {"items": []})
            self.built.append(self.turn)
        return self.turn

    def _call(self, kind: str, item: dict, where: str, own: dict) -> None:
        name = "local_shell" if kind == "local_shell_call" else item.get("name")
        arguments = (json.dumps(item.get("action"), ensure_ascii=False) if kind == "local_shell_call"
                     else item.get("input") if kind == "custom_tool_call" else item.get("arguments"))
        if not isinstance(name, str) or not name or not isinstance(arguments, str):
            self.problems.append((where, gettext("a call must have its name and its arguments (or input) as text")))
            return
        call_id = item.get("call_id") if isinstance(item.get("call_id"), str) else None
        turn = self._open(lambda m: False, where)
        turn.message["tool_calls"].append({"id": call_id, "type": "function",
                                           "function": {"name": name, "arguments": arguments}})
        turn.extras["items"].append(own | {"type": kind})
        if call_id:
            self.names[call_id] = name

    def _reasoning(self, item: dict, where: str, before: str) -> str:
        for key, part in (("content", "reasoning_text"), ("summary", "summary_text")):
            parts = item.get(key)
            if isinstance(parts, list) and parts:
                texts = [self._part(value, f"{where}.{key}[{i}]", (part, "text")) for i, value in enumerate(parts)]
                text = "\n\n".join(texts)
                return f"{before}\n\n{text}" if before and text else before or text
        return before

    def _text(self, parts, where: str) -> str:
        if parts is None or isinstance(parts, str):
            return parts or ""
        if not isinstance(parts, list):
            self.problems.append((where, gettext("must be text or a list of content parts")))
            return ""
        return "".join(self._part(part, f"{where}[{index}]", TEXT_PARTS) for index, part in enumerate(parts))

    def _part(self, part, where: str, kinds) -> str:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in kinds and isinstance(part.get("text"), str):
            return part["text"]
        self.problems.append((where, gettext("a %(kind)s part: only text is supported, and a message is never "
                                             "imported with a part left out") % {"kind": repr(kind)}))
        return ""
