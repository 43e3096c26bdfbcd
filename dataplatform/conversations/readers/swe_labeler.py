"""The SWE Labeler's trajectories (github alibaba/AgenticBigBang, `swe_labeler/examples/trajectories/`, read
upstream by `src/trajectory_normalizer.py`): `{trajectory_id, model?, scaffold?, messages}`, or, in place of
`messages`, `json_content`: JSON text or an object holding the messages as a list, or `{requestid?, model?,
scaffold?, messages}`. Optional: `instance_id`, `request_id`, `labels` or `label_result` (its L1 labels),
`source_artifact_uri`.

- Messages are OpenAI's, or Anthropic content blocks as Claude-based scaffolds log them: an assistant's `text`
  blocks are its content, its `thinking` blocks its reasoning, each `tool_use` block `{id, name, input}` a
  tool call; a user message's `tool_result` blocks `{tool_use_id, content}` are tool results, one message
  each, followed by a user message of its text blocks, if it has any. Other blocks (images, documents) are
  refused by name; `redacted_thinking` (encrypted) is kept beside the message.
- The run's id is `json_content.requestid`, else `trajectory_id`, else `instance_id`, else `request_id`
  (upstream's order); the task is `instance_id`, else that id (upstream labels a trajectory under it).
- The model and scaffold are json_content's when it names them, else the record's. Everything else
  (labels, label_result, source_artifact_uri...) is meta. The format carries no outcome.
"""

import json

from django.utils.translation import gettext

from dataplatform.imports import JsonProblem, json_error, load_json

from ..reading import Problem
from .base import Built, TraceRecord, conversation_of, openai_messages, text, without

FORMAT = "swe_labeler"
ID_KEYS = ("trajectory_id", "instance_id", "request_id")
READ_KEYS = (*ID_KEYS, "model", "scaffold", "messages", "json_content", "tools")
CONTENT_KEYS = ("requestid", "model", "scaffold", "messages", "tools")
# Anthropic block types other than text: a message holding one is read block by block.
ANTHROPIC = ("tool_use", "tool_result", "thinking", "redacted_thinking")
_UNREADABLE = object()  # json_content that holds no messages: its problem says why


def read(record: dict) -> tuple[TraceRecord | None, list[Problem]]:
    problems: list[Problem] = []
    ids = {key: text(record, key, problems, required=True) for key in ID_KEYS if key in record}
    wrapped, messages, path = _content(record, problems)
    request_id = text(wrapped, "requestid", problems, where="json_content.requestid")
    model, model_at = _named(wrapped, record, "model", problems)
    scaffold, scaffold_at = _named(wrapped, record, "scaffold", problems)
    built = _messages(messages, path, problems)
    tools, tools_at = (wrapped["tools"], "json_content.tools") if "tools" in wrapped else (record.get("tools"), "tools")
    conversation = None if messages is _UNREADABLE else conversation_of(built, problems, list_path=path, tools=tools,
                                                                        tools_path=tools_at)
    if problems:
        return None, problems
    candidates = [("json_content.requestid", request_id), *((key, ids.get(key, "")) for key in ID_KEYS)]
    id_at, trace_id = next(((at, value) for at, value in candidates if value), ("", ""))
    meta = without(record, *READ_KEYS)
    if without(wrapped, *CONTENT_KEYS):
        meta["json_content"] = without(wrapped, *CONTENT_KEYS)
    return TraceRecord(FORMAT, conversation, extras=tuple(b.extras for b in built), trace_id=trace_id,
                       task_id=ids.get("instance_id") or trace_id, model=model, harness=scaffold, meta=meta,
                       origins={"trace_id": id_at, "task_id": "instance_id" if ids.get("instance_id") else id_at,
                                "model": model_at, "harness": scaffold_at}), []


def _content(record: dict, problems: list[Problem]) -> tuple[dict, object, str]:
    """(json_content's object or {}, the messages (or _UNREADABLE), their path)."""
    if "json_content" not in record:
        return {}, record.get("messages"), "messages"
    content = record["json_content"]
    if isinstance(content, str):
        try:  # load_json: the text is as untrusted as the line (deep nesting, NaN, NUL...)
            content = load_json(content)
        except json.JSONDecodeError as exc:
            problems.append(("json_content", gettext("must hold JSON: %(problem)s at column %(column)s")
                             % {"problem": json_error(exc.msg), "column": exc.colno}))
            return {}, _UNREADABLE, "json_content"
        except JsonProblem as exc:
            problems.append(("json_content", exc.message))
            return {}, _UNREADABLE, "json_content"
    if isinstance(content, dict):
        return content, content.get("messages"), "json_content.messages"
    if isinstance(content, list):
        return {}, content, "json_content"
    problems.append(("json_content", gettext("must be a list of messages, or an object with messages (as JSON text or "
                                             "not)")))
    return {}, _UNREADABLE, "json_content"


def _named(wrapped: dict, record: dict, key: str, problems: list[Problem]) -> tuple[str, str]:
    if wrapped.get(key) is not None:
        return text(wrapped, key, problems, where=f"json_content.{key}"), f"json_content.{key}"
    return text(record, key, problems), key


def _messages(messages, path: str, problems: list[Problem]) -> list[Built]:
    built = []
    for item in openai_messages(messages, path):
        blocks = item.message.get("content") if isinstance(item.message, dict) else None
        if isinstance(blocks, list) and any(isinstance(b, dict) and b.get("type") in ANTHROPIC for b in blocks):
            built += _from_blocks(item, blocks, problems)
        else:
            built.append(item)
    return built


def _from_blocks(item: Built, blocks: list, problems: list[Problem]) -> list[Built]:
    """An Anthropic message as OpenAI messages: one for an assistant turn, the tool results then the text for
    a user's."""
    role, texts, thinking, calls, results, redacted = item.message.get("role"), [], [], [], [], []
    for index, block in enumerate(blocks):
        at, kind = f"{item.origin}.content[{index}]", block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif role == "assistant" and kind == "thinking" and isinstance(block.get("thinking"), str):
            thinking.append(block["thinking"])
        elif role == "assistant" and kind == "redacted_thinking":
            redacted.append(block)
        elif role == "assistant" and kind == "tool_use":
            calls += _tool_use(block, at, problems)
        elif role == "user" and kind == "tool_result":
            result = {"role": "tool", "tool_call_id": block.get("tool_use_id") or "", "content": block.get("content")}
            results.append(Built(result, at, without(block, "type", "tool_use_id", "content")))
        else:
            problems.append((at, gettext("a %(kind)s block in a %(role)s message: only text, thinking, tool_use "
                                         "(assistant) and tool_result (user) blocks are read, and no block is left "
                                         "out") % {"kind": repr(kind), "role": role}))
    extras = item.extras | ({"redacted_thinking": redacted} if redacted else {})
    if role == "assistant":
        message = {"role": role, "content": "".join(texts), "reasoning": "\n\n".join(thinking), "tool_calls": calls}
        return [Built(message, item.origin, extras)]
    return results + ([Built({"role": role, "content": "".join(texts)}, item.origin, extras)] if texts else [])


def _tool_use(block: dict, at: str, problems: list[Problem]) -> list[dict]:
    name, arguments, call_id = block.get("name"), block.get("input", {}), block.get("id")
    if not isinstance(name, str) or not name:
        problems.append((f"{at}.name", gettext("must be the tool's name, a non-empty string")))
    elif not isinstance(arguments, dict):
        problems.append((f"{at}.input", gettext("must be an object: the tool's arguments")))
    elif call_id is not None and not isinstance(call_id, str):
        problems.append((f"{at}.id", gettext("must be a string")))
    else:
        return [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]
    return []
