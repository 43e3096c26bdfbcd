"""A /tokenize chat request as vLLM 0.34 renders it, for the embedded model server (server.py): its request
model's checks, its chat parser's reading of the messages (vllm/renderers/chat_utils/chat_message.py), then the
chat template. tests/inference/test_server_conformance.py compares the conversation with vLLM's own parser's.
"""

import json
from typing import Any

import jinja2

from .server_fields import BadRequest, flag

# vLLM's words for two chat requests it refuses: both prompt flags true (TokenizeChatRequest's validator), and a
# chat template sent with the request (refused unless vLLM runs with --trust-request-chat-template; off by default).
BOTH_PROMPT_FLAGS = "Cannot set both `continue_final_message` and `add_generation_prompt` to True."
UNTRUSTED_TEMPLATE = ("Chat template is passed with request, but --trust-request-chat-template is not set. "
                      "Refused request with untrusted chat template.")

# Content parts vLLM's chat parser reads as text, and the key each keeps it under.
TEXT_PARTS = {"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal",
              "thinking": "thinking", "tool_reference": "name"}


def chat_text(body: dict, tokenizer) -> str:
    """The chat template applied to a /tokenize chat request, as vLLM applies it.

    vLLM's validator refuses the two prompt flags only when both are sent true. With `continue_final_message`
    alone, `add_generation_prompt` keeps its default (true) and the template renderer refuses the pair, in
    transformers' words. Template errors are the request's fault: 400, as in vLLM.
    """
    add_generation_prompt = flag(body, "add_generation_prompt", True)
    continue_final_message = flag(body, "continue_final_message", False)
    if continue_final_message and body.get("add_generation_prompt"):
        raise BadRequest(BOTH_PROMPT_FLAGS)
    extra = body.get("chat_template_kwargs") or {}
    if not isinstance(extra, dict):
        raise BadRequest("`chat_template_kwargs` must be an object.")
    if body.get("chat_template") is not None or extra.get("chat_template") is not None:
        raise BadRequest(UNTRUSTED_TEMPLATE)
    if unexpected := {"chat_template", "tokenize"} & extra.keys():
        raise BadRequest(f"Found unexpected chat template kwargs from request: {unexpected}")
    conversation, tools = _conversation(body.get("messages")), _tools(body.get("tools"))
    # The request's own fields win over the same names in `chat_template_kwargs`, as in vLLM.
    options = extra | {"tools": tools, "add_generation_prompt": add_generation_prompt,
                       "continue_final_message": continue_final_message}
    try:
        return tokenizer.apply_chat_template(conversation, tokenize=False, **options)
    except (ValueError, TypeError, jinja2.TemplateError) as exc:
        raise BadRequest(str(exc)) from exc


def _conversation(messages: Any) -> list[dict]:
    """`messages` as vLLM 0.34 hands them to a chat template: its request model's checks, then its chat parser
    (vllm/renderers/chat_utils/chat_message.py: `parse_chat_message_content` in the "string" content format that
    the embedded model's template takes, then `_postprocess_messages`).

    Each turn is its role and its content as one string (text parts joined by newlines, "" when there is none);
    an assistant's tool calls (an empty list dropped) with their arguments as an object, and its `reasoning`
    under both `reasoning` and `reasoning_content` (vLLM reads only `reasoning`); a tool result's
    `tool_call_id`; any turn's string `name` and `task`. No other field reaches the template."""
    if not isinstance(messages, list):
        raise BadRequest("`messages` must be a list of objects, each with a string `role`.", param="messages")
    conversation = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest("`messages` must be a list of objects, each with a string `role`.", param="messages")
        role = message["role"]
        if role == "developer":
            raise BadRequest("The embedded model server does not take `developer` messages (vLLM turns them into "
                             "`system` ones for templates without that role); send `system`.", param="messages")
        if "name" in message and not isinstance(message["name"], str):  # null too, as OpenAI's schema has it
            raise BadRequest(f"`messages[{index}].name` must be a string.", param="messages")
        turn = {"role": role, "content": _text(message.get("content"), index)}
        if role == "assistant":
            # An empty list is dropped, so that templates take the plain path.
            if calls := _tool_calls(message.get("tool_calls") or [], index):
                turn["tool_calls"] = calls
            if message.get("reasoning") is not None:
                turn["reasoning"] = turn["reasoning_content"] = message["reasoning"]
        elif role == "tool" and "tool_call_id" in message:
            turn["tool_call_id"] = message["tool_call_id"]
        for field in ("name", "task"):
            if isinstance(message.get(field), str):
                turn[field] = message[field]
        conversation.append(turn)
    return conversation


def _text(content: Any, index: int) -> str:
    """A message's content as vLLM's parser joins it: plain strings and text-like parts, by newlines."""
    if content is None:
        return ""
    if not isinstance(content, str | list):
        raise BadRequest(f"`messages[{index}].content` must be a string or a list of content parts.",
                         param="messages")
    texts = []
    for part in [content] if isinstance(content, str) else content:
        if isinstance(part, dict) and part.get("type") in TEXT_PARTS:
            part = part.get(TEXT_PARTS[part["type"]])
            if part is None:  # vLLM skips a text part without its text
                continue
        if not isinstance(part, str):
            raise BadRequest(f"`messages[{index}].content`: the embedded model reads text only (a string or "
                             f"text parts), not {json.dumps(part)[:80]}.", param="messages")
        texts.append(part)
    return "\n".join(texts)


def _tool_calls(calls: Any, index: int) -> list[dict]:
    """An assistant's tool calls as vLLM takes them: each as OpenAI's request schema has it (an `id`, type
    "function", a `function` with its `name` and its `arguments` as JSON text) or the request is refused; then the
    arguments parsed into the object templates expect, {} for text that is not JSON or not an object (vLLM
    coerces them, so that one malformed call in a conversation's history does not fail every later turn)."""
    if not isinstance(calls, list):
        raise BadRequest(f"`messages[{index}].tool_calls` must be a list.", param="tool_calls")
    parsed = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if (not isinstance(function, dict) or not isinstance(call.get("id"), str) or call.get("type") != "function"
                or not isinstance(function.get("name"), str) or not isinstance(function.get("arguments"), str)):
            raise BadRequest(f'`messages[{index}].tool_calls`: each call must be {{"id": ..., "type": "function", '
                             f'"function": {{"name": ..., "arguments": <JSON text>}}}}, not {json.dumps(call)[:120]}.',
                             param="tool_calls")
        try:
            arguments = json.loads(function["arguments"]) if function["arguments"] else {}
        except ValueError:
            arguments = {}
        parsed.append(call | {"function": function | {"arguments": arguments if isinstance(arguments, dict) else {}}})
    return parsed


def _tools(tools: Any) -> list[dict] | None:
    """`tools` as vLLM hands them to the template: as its request model dumps them, so that a function
    without `description` or `parameters` has them as null (visible to a template that prints the tools)."""
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise BadRequest("`tools` must be a list of function tools.")
    dumped = []
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if (not isinstance(function, dict) or not isinstance(function.get("name"), str)
                or tool.get("type", "function") != "function"):
            raise BadRequest(f'`tools[{index}]` must be {{"type": "function", "function": {{"name": ...}}}}.')
        declared = {"name": None, "description": None, "parameters": None} | function
        others = {key: value for key, value in tool.items() if key not in ("type", "function")}
        dumped.append({"type": "function", "function": declared} | others)
    return dumped


