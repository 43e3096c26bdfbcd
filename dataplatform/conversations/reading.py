"""Reading chat messages as real files spell them into the conversation model, with a field-level problem
for everything that does not fit.

Accepted spellings:
- the reasoning as `reasoning_content` (vLLM, DeepSeek), `reasoning` (OpenRouter, onPanda) or `thinking`
  (Anthropic-style exports); two of them with different text is a problem;
- content as a string, null, or a list of parts; text parts are joined, any other part (an image, audio,
  a file) is refused by name: the platform keeps text only and never drops part of a message silently;
- a tool call's arguments as JSON text or as an object (then written as compact JSON); a call without
  an id gets `call_<message>_<call>`, and a tool result without a `tool_call_id` answers the first call
  of the assistant turn before it that has no answer yet;
- tools as `{"type": "function", "function": {...}}` or the bare function `{name, parameters}`, their keys
  put in the order the database keeps them (`in_stored_order`).
"""

import json
from dataclasses import dataclass, field

from django.utils.translation import gettext, pgettext

from .model import ROLES, Conversation, Message, ToolCall

REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")
Problem = tuple[str, str]  # (field path, message)


@dataclass
class Read:
    """The conversation read, or None, and every problem found on the way."""

    conversation: Conversation | None
    problems: list[Problem] = field(default_factory=list)


def read_conversation(messages, tools=None, *, path: str = "messages", tools_path: str = "tools") -> Read:
    problems: list[Problem] = []
    if not isinstance(messages, list) or not messages:
        return Read(None, [(path, "must be a non-empty list of message objects")])
    read = [_message(raw, f"{path}[{index}]", index, problems) for index, raw in enumerate(messages)]
    read_tools = _tools(tools, tools_path, problems)
    if problems:
        return Read(None, problems)
    return Read(Conversation(messages=_answer_tool_calls(tuple(read)), tools=read_tools))


def _message(raw, where: str, index: int, problems: list[Problem]) -> Message | None:
    if not isinstance(raw, dict):
        problems.append((where, gettext("must be an object with a role")))
        return None
    role = raw.get("role")
    if role not in ROLES:
        problems.append((f"{where}.role", gettext("must be one of %(roles)s") % {"roles": ", ".join(ROLES)}))
        return None
    content = _text(raw.get("content"), f"{where}.content", problems)
    if role == "assistant":
        reasoning = _reasoning(raw, where, problems)
        calls = _tool_calls(raw.get("tool_calls"), f"{where}.tool_calls", index, problems)
        finish = raw.get("finish_reason")
        if finish is not None and not isinstance(finish, str):
            problems.append((f"{where}.finish_reason", gettext("must be a string such as 'stop' or 'tool_calls'")))
            finish = None
        return Message(role=role, content=content or "", reasoning=reasoning, tool_calls=calls, finish_reason=finish)
    for key in ("tool_calls", *REASONING_KEYS):
        if raw.get(key):
            problems.append((f"{where}.{key}", gettext("only an assistant message can have %(key)s") % {"key": key}))
    if role == "tool":
        return Message(role=role, content=content or "", tool_call_id=_string(raw, "tool_call_id", where, problems),
                       name=_string(raw, "name", where, problems))
    return Message(role=role, content=content or "")


def _text(content, where: str, problems: list[Problem]) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        problems.append((where, gettext("must be a string, null, or a list of content parts")))
        return None
    texts = []
    for index, part in enumerate(content):
        kind = part.get("type", "text") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind is None or kind == "text":
            problems.append((f"{where}[{index}]", gettext("must be a part object; a text part is {type: text, text: string}")))
        else:
            problems.append((f"{where}[{index}]", gettext("a %(kind)s part: only text is supported, and a message is "
                                                          "never imported with a part left out") % {"kind": repr(kind)}))
    return "".join(texts)


def _reasoning(raw: dict, where: str, problems: list[Problem]) -> str:
    given = {key: raw[key] for key in REASONING_KEYS if raw.get(key) is not None}
    for key, value in given.items():
        if not isinstance(value, str):
            problems.append((f"{where}.{key}", gettext("must be a string")))
            return ""
    if len(set(given.values())) > 1:
        joined = (" " + pgettext("between two field names", "and") + " ").join(given)
        problems.append((f"{where}.{next(iter(given))}", gettext("%(keys)s are both given, with different text")
                         % {"keys": joined}))
    return next(iter(given.values()), "")


def _tool_calls(raw, where: str, message_index: int, problems: list[Problem]) -> tuple[ToolCall, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.append((where, gettext("must be a list of {id, type: function, function: {name, arguments}}")))
        return ()
    calls = []
    for index, call in enumerate(raw):
        at = f"{where}[{index}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            problems.append((f"{at}.function", gettext("must be an object {name, arguments}")))
            continue
        name = function.get("name")
        if not isinstance(name, str) or not name:
            problems.append((f"{at}.function.name", gettext("must be a non-empty string")))
            continue
        arguments = function.get("arguments", "{}")
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
        elif not isinstance(arguments, str):
            problems.append((f"{at}.function.arguments", gettext("must be JSON text or an object")))
            continue
        call_id = call.get("id") or f"call_{message_index}_{index}"
        if not isinstance(call_id, str):
            problems.append((f"{at}.id", gettext("must be a string")))
            continue
        calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
    return tuple(calls)


def _string(raw: dict, key: str, where: str, problems: list[Problem]) -> str:
    value = raw.get(key) or ""
    if not isinstance(value, str):
        problems.append((f"{where}.{key}", gettext("must be a string")))
        return ""
    return value


def _tools(tools, where: str, problems: list[Problem]) -> tuple[dict, ...]:
    if tools is None:
        return ()
    if not isinstance(tools, list):
        problems.append((where, gettext("must be a list of function schemas")))
        return ()
    read = []
    for index, tool in enumerate(tools):
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
            problems.append((f"{where}[{index}]", gettext("must be {type: function, function: {name, description?, "
                                                          "parameters?}} or the function object itself")))
            continue
        if "parameters" in function and not isinstance(function["parameters"], dict):
            problems.append((f"{where}[{index}].parameters", gettext("must be a JSON schema object")))
            continue
        read.append(in_stored_order({"type": "function", "function": function}))
    return tuple(read)


def in_stored_order(value):
    """`value` with every object's keys in the order PostgreSQL's jsonb keeps them (shorter keys first, then
    bytewise). A chat template writes a tool's JSON as it finds it, so a schema read from a file and the same
    schema read back from the database must be the same sequence to render the same prompt ids."""
    if isinstance(value, dict):
        order = sorted(value, key=lambda key: (len(key.encode()), key.encode()))
        return {key: in_stored_order(value[key]) for key in order}
    if isinstance(value, list):
        return [in_stored_order(item) for item in value]
    return value


def _answer_tool_calls(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """Tool results without a `tool_call_id` answer the next unanswered call of the turn before them."""
    unanswered: list[ToolCall] = []
    linked = []
    for message in messages:
        if message.role == "assistant":
            unanswered = list(message.tool_calls)
        elif message.role == "tool":
            answered = next((call for call in unanswered if call.id == message.tool_call_id), None)
            if answered is None and not message.tool_call_id and unanswered:
                answered = unanswered[0]
                message = Message(role="tool", content=message.content, tool_call_id=answered.id,
                                  name=message.name or answered.name)
            if answered is not None:
                unanswered.remove(answered)
        linked.append(message)
    return tuple(linked)
