"""ChatML families, whose prompt text is written here (`<|im_start|>role\\n...<|im_end|>\\n`), and
`chatml-think`, the embedded SmolLM2's.

SmolLM2's own chat template knows only roles and content. `chatml-think` keeps everything that template
renders as it renders it (the default system prompt when there is no system message, a tool result as a
`tool` turn of its own) and adds the documented conventions for what it cannot show, so that the embedded
model exercises every channel:
- an assistant turn in the response layout (layout.py): `<think>` reasoning, Hermes `<tool_call>` JSON;
  an earlier turn's call writes its arguments as chat templates write them from the training shape
  (`written_arguments`), as vLLM and Qwen3's template do, so that a trainer's template renders the same text;
- the tools, as JSON schemas in a `# Tools` section appended to the system message.

The embedded model's converted folder carries this family as its Jinja chat template (chat_template.py
writes it from the same pieces), so the model is prompted and trained with one template.
"""

import json
from dataclasses import replace

from ..model import Conversation, Message, ToolCall
from .base import Prompt, Template, check_partial, check_spelled
from .layout import Markers, is_complete, response_text

START, END = "<|im_start|>", "<|im_end|>"
SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def turn(role: str, text: str) -> str:
    return f"{START}{role}\n{text}{END}\n"


class ChatmlTemplate(Template):
    """A ChatML family: the context as text of its own (`context_text`), the assistant turn opened, then the
    partial response in the shared layout, tokenized apart from the context as the model's own tokens
    would be; a complete message ends with `<|im_end|>`."""

    markers = Markers()
    end_of_turn = END

    def context_text(self, conversation: Conversation) -> str:
        raise NotImplementedError

    def render(self, conversation: Conversation, partial: Message | None, *, backend) -> Prompt:
        check_partial(partial)
        context = backend.tokenize(self.context_text(conversation) + f"{START}assistant\n")
        response = []
        if partial is not None:
            complete = is_complete(partial)
            text = response_text(partial, self.markers, complete=complete)
            response = backend.tokenize(text)
            check_spelled(response, text, backend)
            if complete:
                response += backend.tokenize(END)
        return Prompt(context + response, len(context))


class ChatmlThink(ChatmlTemplate):
    name = "chatml-think"

    def context_text(self, conversation: Conversation) -> str:
        messages = list(conversation.messages)
        system = messages.pop(0).content if messages and messages[0].role == "system" else SMOLLM2_SYSTEM
        if conversation.tools:
            system += "\n\n" + _tools_section(conversation.tools)
        turns = [turn("system", system)]
        for message in messages:
            text = (response_text(as_written(message), self.markers, complete=True) if message.role == "assistant"
                    else message.content)
            turns.append(turn(message.role, text))
        return "".join(turns)


# The tools section: TOOLS_HEAD, each schema as JSON (one a line), TOOLS_TAIL.
TOOLS_HEAD = "# Tools\n\nYou can call the functions whose JSON schemas are listed in <tools></tools>:\n<tools>\n"
TOOLS_TAIL = ("\n</tools>\n\nTo call one, write its name and arguments as one JSON object inside <tool_call></tool_call>:\n"
              '<tool_call>\n{"name": <function name>, "arguments": <arguments object>}\n</tool_call>\n'
              "Each result comes back in a tool message.")


def _tools_section(tools) -> str:
    return TOOLS_HEAD + "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools) + TOOLS_TAIL


def written_arguments(call: ToolCall) -> str:
    """A past call's arguments as a chat template writes them from the training shape (`for_training()`): an
    object through `tojson` (json.dumps' defaults, non-ASCII kept), any other text as it is."""
    parsed = call.arguments_object()
    return json.dumps(parsed, ensure_ascii=False) if isinstance(parsed, dict) else call.arguments


def as_written(message: Message) -> Message:
    """`message` with its calls' arguments as `written_arguments` gives them."""
    if not message.tool_calls:
        return message
    return replace(message, tool_calls=tuple(replace(call, arguments=written_arguments(call))
                                             for call in message.tool_calls))
