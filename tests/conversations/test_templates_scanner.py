"""The response layout read back from bytes: lenient where models vary, every decision final on a partial
stream (pending only where the next bytes decide), and nothing the model wrote lost."""

import pytest

from dataplatform.conversations.templates.layout import Markers
from dataplatform.conversations.templates.scanner import scan


def read(text: str, *, finished: bool = True, markers: Markers | None = None) -> list[tuple[str, str]]:
    """(channel, text) of every span, tool spans tagged with their call: `tool_name#0`."""
    data = text.encode()
    result = scan(data, markers or Markers(), finished=finished)
    assert [span.start for span in result.spans] == [0] + [span.end for span in result.spans[:-1]]
    assert not result.spans or result.spans[-1].end == len(data)  # every byte has a channel
    return [(span.channel + ("" if span.call is None else f"#{span.call}"), data[span.start:span.end].decode())
            for span in result.spans]


def test_the_layout_as_rendered():
    text = '<think>\nhmm\n</think>\n\nSure.\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
    assert read(text) == [
        ("marker", "<think>\n"), ("reasoning", "hmm"), ("marker", "\n</think>\n\n"), ("content", "Sure."),
        ("marker", '\n<tool_call>\n{"name": "'), ("tool_name#0", "f"), ("marker", '", "arguments": '),
        ("tool_arguments#0", '{"a": 1}'), ("marker", "}\n</tool_call>")]


def test_json_spaced_any_way_around_the_name_is_read():
    spans = read('<tool_call>{ "name" :"f",\n  "arguments":{"a":{"b":2}}}</tool_call>')
    assert ("tool_name#0", "f") in spans and ("tool_arguments#0", '{"a":{"b":2}}') in spans


def test_reasoning_closed_without_newlines_and_content_right_after():
    assert read("<think>abc</think>Hello") == [("marker", "<think>"), ("reasoning", "abc"), ("marker", "</think>"),
                                               ("content", "Hello")]


def test_only_two_newlines_after_the_reasoning_are_template():
    assert read("<think>\na\n</think>\n\n\nb")[-1] == ("content", "\nb")


def test_a_reasoning_block_counts_only_at_the_start():
    assert read("Hi <think>x</think>") == [("content", "Hi <think>x</think>")]


def test_whitespace_between_calls_is_template_and_text_after_them_is_content():
    spans = read('<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n\n<tool_call>\n{"name": "b", '
                 '"arguments": {}}\n</tool_call>\nDone.')
    assert [text for channel, text in spans if channel == "content"] == ["Done."]
    assert ("tool_name#1", "b") in spans


def test_a_call_that_does_not_start_as_the_layout_keeps_its_bytes_as_arguments():
    spans = read('<tool_call>\n{"arguments": {}, "name": "f"}\n</tool_call>')
    assert spans == [("marker", '<tool_call>\n{"'), ("tool_arguments#0", 'arguments": {}, "name": "f"'),
                     ("marker", "}\n</tool_call>")]


def test_a_call_without_arguments_closes_with_none():
    assert read('<tool_call>\n{"name": "f"}\n</tool_call>') == [
        ("marker", '<tool_call>\n{"name": "'), ("tool_name#0", "f"), ("marker", '"}\n</tool_call>')]


def test_braces_inside_the_arguments_are_arguments():
    spans = read('<tool_call>\n{"name": "f", "arguments": {"s": "} </x>"} }\n</tool_call>')
    assert ("tool_arguments#0", '{"s": "} </x>"} ') in spans


@pytest.mark.parametrize(("text", "pending"), [
    ("<thi", "<thi"),  # perhaps a reasoning block
    ("<think>\nabc\n", "\n"),  # perhaps the newline before </think>
    ("<think>\nabc\n</thi", "\n</thi"),
    ("Sure.\n", "\n"),  # perhaps the newline before <tool_call>
    ("Sure. <tool", "<tool"),
    ('<tool_call>\n{"name": "f", "arguments": {"a": 1}', "}"),  # the arguments' own brace, or the call's?
    ('<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool', "}\n</tool"),
])
def test_a_partial_stream_ends_pending_where_the_next_bytes_decide(text, pending):
    assert read(text, finished=False)[-1] == ("pending", pending)
    assert "pending" not in [channel for channel, _ in read(text, finished=True)]  # a finished stream decides


def test_what_cannot_start_a_marker_is_decided_at_once():
    assert read("<think>\nabc", finished=False)[-1] == ("reasoning", "abc")
    assert read('<tool_call>\n{"name": "get_w', finished=False)[-1] == ("tool_name#0", "get_w")
    assert read("<b>", finished=False) == [("content", "<b>")]


def test_an_unclosed_block_at_the_end_of_a_finished_stream_keeps_its_text():
    assert read("<think>\nstill thinking\n")[-1] == ("reasoning", "still thinking\n")
    assert read('<tool_call>\n{"name": "f", "arguments": {"a": 1}')[-1] == ("tool_arguments#0", '{"a": 1}')


def test_without_markers_everything_is_content():
    text = '<think>x</think><tool_call>{"name": "f"}</tool_call>'
    assert read(text, markers=Markers(reasoning=None, tool_call=None)) == [("content", text)]


def test_other_markers_are_read_the_same_way():
    markers = Markers(reasoning=("[THINK]", "[/THINK]"), tool_call=None)
    assert read("[THINK]a[/THINK]b", markers=markers) == [("marker", "[THINK]"), ("reasoning", "a"),
                                                          ("marker", "[/THINK]"), ("content", "b")]


def test_markers_that_start_with_whitespace_are_refused():
    with pytest.raises(ValueError, match="visible character"):
        Markers(reasoning=("\n<think>", "</think>"))
