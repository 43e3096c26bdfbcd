"""`chatml-think` as a Jinja chat template, the one the embedded model's converted folder carries: the tokenizer's
own (`chat_template.jinja`), and its training twin (`chat_template_training.jinja`) with `{% generation %}`
around each assistant response and its end-of-turn marker, which TRL's `assistant_only_loss` needs.

Both are written here from the pieces chatml.py renders with (the turn markers, the default system prompt, the
tools section) and the response layout's markers (layout.py), so that the model is prompted and trained with
one template: given a conversation in the training shape (`Conversation.for_training()`, what exports write and
TRL hands `apply_chat_template`), it renders the text `ChatmlThink` renders, system, tools, reasoning, tool calls
and tool results alike (tests/conversations/test_templates_chat_template.py checks it on every conversation the
templates' round-trip property draws). It also reads what vLLM's chat parser hands a template: the reasoning
under `reasoning`, a call without its `function` wrapper.
"""

import json

from .chatml import END, SMOLLM2_SYSTEM, START, TOOLS_HEAD, TOOLS_TAIL
from .layout import Markers

MARKERS = Markers()


def _text(value: str) -> str:
    """`value` as a Jinja string literal (JSON's escapes are Jinja's too, and keep the template ASCII)."""
    return json.dumps(value)


def _out(expression: str) -> str:
    return "{{- " + expression + " -}}"


def chat_template(*, training: bool = False) -> str:
    """The Jinja source; `training` wraps each assistant response in `{% generation %}` (the text is the same)."""
    (think, unthink), (call, uncall) = MARKERS.reasoning, MARKERS.tool_call
    newline = _out(_text("\n"))
    lines = [
        "{#- The embedded model's chat template: the chatml-think response template, written by "
        "dataplatform/conversations/templates/chat_template.py. -#}",
        "{%- if messages and messages[0].role == 'system' -%}",
        "  {%- set system = messages[0].content or '' -%}",
        "  {%- set turns = messages[1:] -%}",
        "{%- else -%}",
        "  {%- set system = " + _text(SMOLLM2_SYSTEM) + " -%}",
        "  {%- set turns = messages -%}",
        "{%- endif -%}",
        _out(_text(f"{START}system\n") + " + system"),
        "{%- if tools -%}",
        "  " + _out(_text("\n\n" + TOOLS_HEAD)),
        "  {%- for tool in tools -%}",
        "    {%- if not loop.first -%}" + newline + "{%- endif -%}",
        "    " + _out("tool | tojson"),
        "  {%- endfor -%}",
        "  " + _out(_text(TOOLS_TAIL)),
        "{%- endif -%}",
        _out(_text(f"{END}\n")),
        "{%- for message in turns -%}",
        "  " + _out(_text(START) + " + message.role + " + _text("\n")),
        "  {%- if message.role == 'assistant' -%}",
        "    {%- generation -%}" if training else "",
        "    {%- set reasoning = message.reasoning_content or message.reasoning -%}",
        "    {%- if reasoning -%}",
        "      " + _out(_text(f"{think}\n") + " + reasoning + " + _text(f"\n{unthink}\n\n")),
        "    {%- endif -%}",
        "    " + _out("message.content or ''"),
        "    {%- for tool_call in message.tool_calls or [] -%}",
        "      {%- set function = tool_call.function or tool_call -%}",
        "      {%- if message.content or not loop.first -%}" + newline + "{%- endif -%}",
        "      " + _out(_text(f'{call}\n{{"name": "') + " + function.name + " + _text('", "arguments": ')),
        "      {%- if function.arguments is string -%}" + _out("function.arguments") + "{%- else -%}"
        + _out("function.arguments | tojson") + "{%- endif -%}",
        "      " + _out(_text(f"}}\n{uncall}")),
        "    {%- endfor -%}",
        "    " + _out(_text(END)),
        "    {%- endgeneration -%}" if training else "",
        "    " + newline,
        "  {%- else -%}",
        "    " + _out("(message.content or '') + " + _text(f"{END}\n")),
        "  {%- endif -%}",
        "{%- endfor -%}",
        "{%- if add_generation_prompt -%}",
        "  " + _out(_text(f"{START}assistant\n")),
        "{%- endif -%}",
    ]
    return "\n".join(line for line in lines if line) + "\n"
