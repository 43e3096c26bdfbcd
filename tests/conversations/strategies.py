"""The conversations the response templates' properties draw (test_templates.py: the round trip;
test_templates_chat_template.py: the embedded model's chat template renders what the response template does).

Generated text mixes words, CJK and emoji (which byte-level BPE splits over several tokens) and the
pieces that look like the start of a marker ("<thi", "}\\n", "\\n"), so that tokens holding marker and
text bytes together, and pending ends, come up in every run.
"""

import json
import string

from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st

from dataplatform.conversations.model import Message, ToolCall
from dataplatform.conversations.templates import Markers

EXAMPLES = settings(deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])

tricky = st.sampled_from(["<", "</", "<thi", "</think", "<tool_", "</tool_call", "{", "}", "} ", "}\n", '"', "\n",
                          "\n\n", " ", "\t", "\r", "\x00", "😀", "🎉", "👩‍💻", "巴黎", "天气很好", "日本語", "é", "\u200b"])
# Control characters come from `tricky`: SmolLM2's vocabulary lacks a few of them, and the bytes that
# begin unassigned planes (category Cn); the assumption below skips those, they are not what is tested.
words = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cn")), max_size=12)
texts = st.lists(st.one_of(words, tricky), max_size=6).map("".join)
json_values = st.recursive(st.none() | st.booleans() | st.integers() | texts,
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(words, inner, max_size=3),
                           max_leaves=6)
json_arguments = st.builds(lambda value, ascii_only, compact: json.dumps(
    value, ensure_ascii=ascii_only, separators=(",", ":") if compact else None),
    st.dictionaries(words, json_values, max_size=3), st.booleans(), st.booleans())
names = st.text(string.ascii_letters + string.digits + "_.-", min_size=1, max_size=20)


@st.composite
def messages(draw, finish_reason: str | None = "stop"):
    calls = draw(st.lists(st.tuples(names, st.one_of(json_arguments, texts)), max_size=3))
    tool_calls = tuple(ToolCall(id=f"call_{index}", name=name, arguments=arguments)
                       for index, (name, arguments) in enumerate(calls))
    if finish_reason == "stop" and tool_calls:
        finish_reason = "tool_calls"
    return Message(role="assistant", reasoning=draw(texts), content=draw(texts), tool_calls=tool_calls,
                   finish_reason=finish_reason)


def assume_writable(message: Message, backend) -> None:
    """Text that contains a marker (or a special token) cannot round-trip in any template, nor text the
    tokenizer cannot write (SmolLM2's has no token for a few control characters)."""
    forbidden = [*Markers().reasoning, *Markers().tool_call, *backend.tokenizer.get_added_vocab()]
    fields = [message.reasoning, message.content] + [part for call in message.tool_calls
                                                     for part in (call.name, call.arguments)]
    assume(not any(marker in field for marker in forbidden for field in fields))
    assume(all(b"".join(backend.token_pieces(backend.tokenize(field))) == field.encode() for field in fields))
