"""The round trip of the response templates on the embedded tokenizer, for the two families that write
their own layout: `parse(render(m))` gives `m` back with every token's channel right, and a stream cut
anywhere parses into a prefix of the message that only ever grows, on the messages strategies.py draws.
"""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataplatform.conversations.model import Conversation, Message, ToolCall
from dataplatform.conversations.templates import FAMILIES, MARKER, PENDING, Markers
from dataplatform.conversations.templates.layout import response_pieces

from .strategies import EXAMPLES, assume_writable, messages

pytestmark = pytest.mark.model

FAMILY_NAMES = ["chatml-think", "qwen3"]
CONVERSATION = Conversation(messages=(Message(role="user", content="What is the weather in Paris?"),))


@pytest.fixture(scope="module")
def backend(local_backend):
    return local_backend


def expected_channels(message: Message, ids: list[int], backend, *, complete: bool) -> list[str]:
    """The channel of each token from the text render wrote: a token with any text byte is that text's
    (its first), one of template bytes alone (or past the text: the end of the turn) is a marker."""
    by_byte = [channel for channel, text in response_pieces(message, Markers(), complete=complete)
               for _ in text.encode()]
    channels, start = [], 0
    for piece in backend.token_pieces(ids):
        inside = by_byte[start:start + len(piece)]
        channels.append(next((channel for channel in inside if channel != MARKER), MARKER))
        start += len(piece)
    return channels


def is_prefix(partial: Message, whole: Message) -> bool:
    """Every field of `partial` is where `whole` starts: its calls are `whole`'s first ones, the last of
    them perhaps still being written."""
    if not (whole.reasoning.startswith(partial.reasoning) and whole.content.startswith(partial.content)):
        return False
    if not partial.tool_calls:
        return True
    *done, last = partial.tool_calls
    if len(partial.tool_calls) > len(whole.tool_calls) or tuple(done) != whole.tool_calls[:len(done)]:
        return False
    growing = whole.tool_calls[len(done)]
    return (last.id == growing.id and growing.name.startswith(last.name)
            and growing.arguments.startswith(last.arguments))


def parse_cut(template, ids: list[int], cut: int, whole, backend) -> Message:
    """The stream cut after `cut` tokens, still streaming, parses into a prefix of the whole, with every
    token's channel either pending or the one it has in the whole."""
    parsed = template.parse(ids[:cut], backend=backend)
    assert parsed.message.finish_reason is None
    assert is_prefix(parsed.message, whole.message), (cut, parsed.message, whole.message)
    assert all(channel in (PENDING, final) for channel, final in zip(parsed.channels, whole.channels, strict=False))
    return parsed.message


@pytest.mark.parametrize("family", FAMILY_NAMES)
@settings(EXAMPLES, max_examples=500)
@given(message=messages(), cut=st.floats(0, 1, exclude_max=True))
def test_parse_of_render_is_the_message_with_every_channel_right(family, message, cut, backend):
    assume_writable(message, backend)
    template = FAMILIES[family]
    ids = template.render(CONVERSATION, message, backend=backend).response_ids
    parsed = template.parse(ids, backend=backend)
    assert parsed.message == message
    assert parsed.channels == expected_channels(message, ids, backend, complete=True)
    assert PENDING not in parsed.channels
    parse_cut(template, ids, int(cut * len(ids)), parsed, backend)  # and the stream cut anywhere


@pytest.mark.parametrize("family", FAMILY_NAMES)
@settings(EXAMPLES, max_examples=200)
@given(message=messages(finish_reason=None), cut=st.floats(0, 1, exclude_max=True))
def test_a_partial_message_renders_open_and_reads_back_where_the_stream_stops(family, message, cut, backend):
    assume_writable(message, backend)
    template = FAMILIES[family]
    ids = template.render(CONVERSATION, message, backend=backend).response_ids
    ended = template.parse(ids, backend=backend, finish_reason="length")
    assert ended.message == replace(message, finish_reason="length")
    assert ended.channels == expected_channels(message, ids, backend, complete=False)
    parse_cut(template, ids, int(cut * len(ids)), ended, backend)


FIXED = [
    Message(role="assistant", reasoning="The user wants 巴黎's weather 🌦; call the tool.\n", content="Let me check.",
            tool_calls=(ToolCall(id="call_0", name="get_weather", arguments='{"city": "巴黎", "days": [1, 2]}'),
                        ToolCall(id="call_1", name="get_time", arguments='{"tz":{"name":"Europe/Paris"}}')),
            finish_reason="tool_calls"),
    Message(role="assistant", content="Sunny, 21 °C 👨‍👩‍👧 — 天气很好.\n", finish_reason="stop"),
    Message(role="assistant", reasoning="Nothing to call. <b>", content="", finish_reason="stop"),
    Message(role="assistant", tool_calls=(ToolCall(id="call_0", name="run", arguments='{"cmd": "ls }"'),),
            finish_reason="tool_calls"),  # broken JSON, a brace at its end
]


@pytest.mark.parametrize("family", FAMILY_NAMES)
@pytest.mark.parametrize("message", FIXED, ids=["calls", "emoji-content", "reasoning-only", "broken-json"])
def test_a_stream_cut_at_every_position_parses_into_a_growing_prefix(family, message, backend):
    template = FAMILIES[family]
    ids = template.render(CONVERSATION, message, backend=backend).response_ids
    whole = template.parse(ids, backend=backend)
    assert whole.message == message
    before = template.parse([], backend=backend).message
    for cut in range(len(ids)):
        now = parse_cut(template, ids, cut, whole, backend)
        assert is_prefix(before, now), (cut, before, now)  # each grows from the one before
        before = now


def test_byte_split_characters_are_held_back_until_whole(backend):
    template = FAMILIES["chatml-think"]
    ids = template.render(CONVERSATION, Message(role="assistant", content="😀"), backend=backend).response_ids
    assert len(ids) > 1  # one emoji, several tokens
    assert [template.parse(ids[:cut], backend=backend).message.content for cut in range(len(ids) + 1)] == \
           [""] * len(ids) + ["😀"]
    assert template.parse(ids[:1], backend=backend).channels == ["content"]  # its channel is known at once
