"""`qwen3`: the context as Qwen3's chat template renders it (the one in Qwen3's tokenizer_config.json),
applied to the conversation's training shape (`Conversation.for_training()`: arguments as objects):

- the tools in the system turn, inside `<tools></tools>`, each as JSON, with Qwen's instructions;
  no system turn at all when there is neither a system message nor tools;
- an assistant turn keeps its reasoning (`<think>\\n...\\n</think>\\n\\n`, newlines at its edges
  stripped) only after the last real user query, i.e. inside the current agentic loop, and then only
  when it has reasoning or is the conversation's last message; earlier turns lose it;
- tool calls as `<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>`, arguments serialized as
  the template's `tojson` does;
- tool results as `<tool_response>` blocks in a `user` turn, consecutive results in one turn.

The partial response follows in the shared layout (layout.py), which is what Qwen3 generates. Not
rendered: `enable_thinking=False` (an empty think block after the generation prompt), and reasoning
written as `<think>` text inside a stored content (the platform never stores it so).
"""

import json

from ..model import Conversation, Message
from .chatml import END, START, ChatmlTemplate, turn, written_arguments

TOOLS_HEADER = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
TOOLS_FOOTER = ("\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                'within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, '
                '"arguments": <args-json-object>}\n</tool_call>')


class Qwen3(ChatmlTemplate):
    name = "qwen3"

    def context_text(self, conversation: Conversation) -> str:
        messages = conversation.messages
        system = messages[0].content if messages and messages[0].role == "system" else None
        parts = []
        if conversation.tools:
            schemas = "".join("\n" + json.dumps(tool, ensure_ascii=False) for tool in conversation.tools)
            lead = "" if system is None else system + "\n\n"
            parts.append(turn("system", lead + TOOLS_HEADER + schemas + TOOLS_FOOTER))
        elif system is not None:
            parts.append(turn("system", system))
        last_query = _last_query(messages)
        last = len(messages) - 1
        for index, message in enumerate(messages):
            if message.role == "user" or (message.role == "system" and index > 0):
                parts.append(turn(message.role, message.content))
            elif message.role == "assistant":
                thinking = index > last_query and (index == last or bool(message.reasoning))
                parts.append(_assistant(message, thinking))
            elif message.role == "tool":
                if index == 0 or messages[index - 1].role != "tool":
                    parts.append(f"{START}user")
                parts.append(f"\n<tool_response>\n{message.content}\n</tool_response>")
                if index == last or messages[index + 1].role != "tool":
                    parts.append(f"{END}\n")
        return "".join(parts)


def _last_query(messages: tuple[Message, ...]) -> int:
    """The last user message that is not a wrapped tool result; the last message when there is none."""
    for index in reversed(range(len(messages))):
        content = messages[index].content
        if messages[index].role == "user" and not (content.startswith("<tool_response>")
                                                   and content.endswith("</tool_response>")):
            return index
    return len(messages) - 1


def _assistant(message: Message, thinking: bool) -> str:
    content = message.content
    text = f"{START}assistant\n"
    if thinking:
        reasoning = message.reasoning.strip("\n")
        text += f"<think>\n{reasoning}\n</think>\n\n" + content.lstrip("\n")
    else:
        text += content
    for index, call in enumerate(message.tool_calls):
        if content or index:
            text += "\n"
        text += f'<tool_call>\n{{"name": "{call.name}", "arguments": {written_arguments(call)}}}\n</tool_call>'
    return text + f"{END}\n"
