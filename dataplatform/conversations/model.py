"""The one conversation model of the platform, OpenAI chat shaped.

- `system` and `user` messages carry `content`;
- `assistant` messages carry `content`, `reasoning` (the thinking channel; never stored as
  `<think>...</think>` text inside the content), `tool_calls` and `finish_reason`;
- `tool` messages carry the result of one call: `tool_call_id`, `name` and `content`;
- a conversation may carry `tools`: the function schemas offered to the model, each
  `{"type": "function", "function": {"name", "description"?, "parameters"?}}`.

Text is always a string ("" when there is none): content given as text parts is joined on input
(dataplatform/conversations/reading.py). A tool call's `arguments` is the JSON text, exactly as the
model wrote it, so a correction can continue inside it token by token; `arguments_object()` parses it.

Two shapes go out:
- `as_dict()`, the stored shape: OpenAI's, with `reasoning` and the arguments as text;
- `for_training()`, what exports write: what Hugging Face chat templates and TRL read, with the
  reasoning under `reasoning_content` and the arguments as an object when they are valid JSON (the
  `tools` go in a column of their own).
"""

from dataclasses import dataclass, field

from dataplatform.imports.parsers import load_json

ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as written

    def arguments_object(self):
        """The arguments parsed, or None when the text is not JSON (a model can write broken JSON) or not JSON
        every reader takes (nested past MAX_JSON_DEPTH, NaN, a key twice, NUL...): then the text is kept."""
        try:
            return load_json(self.arguments)
        except ValueError:  # json.JSONDecodeError and JsonProblem both
            return None

    def as_dict(self) -> dict:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}

    def for_training(self) -> dict:
        parsed = self.arguments_object()
        arguments = parsed if isinstance(parsed, dict) else self.arguments
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": arguments}}


@dataclass(frozen=True)
class Message:
    role: str
    content: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""
    finish_reason: str | None = None

    def as_dict(self) -> dict:
        message = self._common(reasoning_key="reasoning", tool_call=ToolCall.as_dict)
        if self.finish_reason is not None:
            message["finish_reason"] = self.finish_reason
        return message

    def for_training(self) -> dict:
        return self._common(reasoning_key="reasoning_content", tool_call=ToolCall.for_training)

    def _common(self, *, reasoning_key: str, tool_call) -> dict:
        message: dict = {"role": self.role, "content": self.content}
        if self.reasoning:
            message[reasoning_key] = self.reasoning
        if self.tool_calls:
            message["tool_calls"] = [tool_call(call) for call in self.tool_calls]
        if self.role == "tool":
            message["tool_call_id"] = self.tool_call_id
            if self.name:
                message["name"] = self.name
        return message


@dataclass(frozen=True)
class Conversation:
    messages: tuple[Message, ...]
    tools: tuple[dict, ...] = field(default=())

    def as_dict(self) -> dict:
        data: dict = {"messages": [message.as_dict() for message in self.messages]}
        if self.tools:
            data["tools"] = [dict(tool) for tool in self.tools]
        return data

    def for_training(self) -> list[dict]:
        return [message.for_training() for message in self.messages]
