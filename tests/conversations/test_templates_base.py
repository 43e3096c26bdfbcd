"""Parsing response tokens (what every family shares): where a stream ends, what its finish reason is,
and which channel a token gets when it holds marker bytes and text bytes together."""

import pytest

from dataplatform.conversations.model import Conversation, Message, ToolCall
from dataplatform.conversations.templates import FAMILIES, Markers
from dataplatform.conversations.templates.generic import GenericTemplate
from dataplatform.errors import Refused

pytestmark = pytest.mark.model

TEMPLATE = FAMILIES["chatml-think"]
CONVERSATION = Conversation(messages=(Message(role="user", content="Hi"),))


def test_the_end_of_turn_finishes_the_message_and_what_follows_it_is_ignored(local_backend):
    ids = local_backend.tokenize("Hello<|im_end|>stray")
    parsed = TEMPLATE.parse(ids, backend=local_backend)
    assert (parsed.message.content, parsed.message.finish_reason) == ("Hello", "stop")
    assert parsed.channels == ["content"] + ["marker"] * (len(ids) - 1)


def test_stop_with_tool_calls_is_tool_calls(local_backend):
    ids = local_backend.tokenize('<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call><|im_end|>')
    message = TEMPLATE.parse(ids, backend=local_backend).message
    assert message.finish_reason == "tool_calls"
    assert message.tool_calls == (ToolCall(id="call_0", name="f", arguments="{}"),)


def test_a_stream_that_ended_without_its_end_token_takes_the_streams_reason(local_backend):
    ids = local_backend.tokenize("Sure.\n")
    streaming = TEMPLATE.parse(ids, backend=local_backend)
    assert (streaming.message.content, streaming.message.finish_reason) == ("Sure.", None)
    assert streaming.channels[-1] == "pending"  # the newline may come before a <tool_call>
    ended = TEMPLATE.parse(ids, backend=local_backend, finish_reason="length")
    assert (ended.message.content, ended.message.finish_reason) == ("Sure.\n", "length")
    assert ended.channels[-1] == "content"


def test_a_token_with_marker_and_text_bytes_belongs_to_the_text(local_backend):
    ids = local_backend.tokenize('<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>')
    tokens = list(zip(local_backend.token_pieces(ids), TEMPLATE.parse(ids, backend=local_backend).channels,
                      strict=True))
    assert (b' {"', "tool_arguments") in tokens  # the space before the arguments, and their first bytes
    assert (b"}}", "tool_arguments") in tokens  # the arguments' last brace, and the call's
    assert {channel for piece, channel in tokens if piece == b' "'} == {"marker"}  # template bytes alone


def test_an_empty_response_is_an_empty_assistant_message(local_backend):
    parsed = TEMPLATE.parse([], backend=local_backend)
    assert (parsed.message, parsed.channels) == (Message(role="assistant"), [])


def test_only_an_assistant_message_can_be_continued(local_backend):
    with pytest.raises(Refused, match="Only an assistant message"):
        TEMPLATE.render(CONVERSATION, Message(role="user", content="x"), backend=local_backend)


def test_a_message_the_family_has_no_markers_for_is_refused_not_flattened(local_backend):
    plain = GenericTemplate(Markers(reasoning=None, tool_call=None))
    with pytest.raises(Refused, match="no markers for reasoning"):
        plain.render(CONVERSATION, Message(role="assistant", reasoning="hmm"), backend=local_backend)


def test_text_the_tokenizer_cannot_write_is_refused_rather_than_continued_from_another_prefix(local_backend):
    # SmolLM2's vocabulary has no token for U+0006: tokenized, it would silently disappear.
    with pytest.raises(Refused, match="cannot be written exactly"):
        TEMPLATE.render(CONVERSATION, Message(role="assistant", content="a\x06b"), backend=local_backend)
