"""The check of a call's arguments against a tool's input schema, and how result parts become text
(no server involved)."""

import base64

import pytest
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from dataplatform.errors import Refused
from dataplatform.tools import Tool, parse_arguments, validate_arguments
from dataplatform.tools.client import _part_text

TOOL = Tool(server="s", name="search", description="Search.", input_schema={
    "type": "object",
    "properties": {"query": {"type": "string", "minLength": 1},
                   "filters": {"type": "array", "items": {"type": "object",
                                                          "properties": {"year": {"type": "integer"}}}}},
    "required": ["query"],
    "additionalProperties": False,
})


@pytest.mark.parametrize("arguments, expected", [
    ('{"query": "x"}', {"query": "x"}), ({"query": "x"}, {"query": "x"}), ("", {}), (None, {}), ("  ", {}),
])
def test_arguments_are_a_dict_or_a_json_string(arguments, expected):
    assert parse_arguments(arguments) == expected


@pytest.mark.parametrize("arguments, detail", [
    ({"query": "x", "filters": [{"year": 2024}, {"year": "last"}]},
     "arguments.filters[1].year: 'last' is not of type 'integer'"),
    ({"query": ""}, "arguments.query: '' should be non-empty"),
    ({"query": "x", "limit": 3}, "arguments: Additional properties are not allowed ('limit' was unexpected)"),
    ({}, "arguments: 'query' is a required property"),
    ('["query"]', "arguments: must be a JSON object (name: value), not list."),
    ('{"query": "x"', "arguments: not JSON (line 1, column 14: Expecting ',' delimiter)."),
])
def test_a_misfit_is_refused_with_its_path(arguments, detail):
    with pytest.raises(Refused) as refused:
        validate_arguments(TOOL, arguments)
    assert refused.value.detail == detail
    assert refused.value.body() == {"arguments": [detail]}


def test_several_problems_are_counted():
    with pytest.raises(Refused, match=r"\(and 1 more problem\)$"):
        validate_arguments(TOOL, {"query": 1, "limit": 3})


def test_a_tool_with_no_schema_takes_an_object():
    bare = Tool(server="s", name="ping", description="")
    assert validate_arguments(bare, "{}") == {}
    assert bare.as_openai()["function"]["parameters"] == {"type": "object", "properties": {}}


def test_a_broken_schema_of_the_server_leaves_the_check_to_the_server():
    broken = Tool(server="s", name="odd", description="", input_schema={"type": "object", "required": "query"})
    assert validate_arguments(broken, {"anything": 1}) == {"anything": 1}


def test_every_kind_of_part_becomes_text():
    png = base64.b64encode(b"p" * 1234).decode()
    parts = [
        TextContent(type="text", text="plain <b>text</b>"),
        ImageContent(type="image", data=png, mime_type="image/png"),
        AudioContent(type="audio", data=base64.b64encode(b"a" * 10).decode(), mime_type="audio/wav"),
        EmbeddedResource(type="resource", resource=TextResourceContents(uri="file:///notes.md", text="hello",
                                                                        mime_type="text/markdown")),
        EmbeddedResource(type="resource", resource=BlobResourceContents(uri="file:///a.bin", blob=png)),
        ResourceLink(type="resource_link", uri="file:///big.csv", name="big.csv"),
    ]
    assert [_part_text(part) for part in parts] == [
        "plain <b>text</b>",
        "[image/png, 1234 bytes]",
        "[audio/wav, 10 bytes]",
        "[resource file:///notes.md, text/markdown, 5 characters]",
        "[resource file:///a.bin, binary, 1234 bytes]",
        "[resource link file:///big.csv]",
    ]


# Strict arguments (issue 37): JSON as RFC 8259 defines it, valid Unicode, bounded depth, numbers and size,
# whichever shape the arguments came in: checked before anything is stored or sent to a server.
@pytest.mark.parametrize("arguments, detail", [
    ('{"query": NaN}', "arguments: invalid JSON: NaN is not allowed"),
    ('{"query": "x", "limit": Infinity}', "arguments: invalid JSON: Infinity is not allowed"),
    ('{"query": "a", "query": "b"}', "arguments.query: is given twice in one object"),
    ('{"query": "\\ud800"}', "arguments.query: contains a NUL character or an unpaired surrogate"),
    ({"query": "a\x00b"}, "arguments.query: contains a NUL character or an unpaired surrogate"),
    ({"query": "\udfff"}, "arguments.query: contains a NUL character or an unpaired surrogate"),
    ('{"query": "x", "n": ' + "9" * 5000 + "}", "arguments: invalid JSON: Exceeds the limit"),
    ('{"query": "x", "n": ' + "9" * 30 + "}", "arguments.n: is a number too large to store"),
    ({"query": "x", "n": 2**70}, "arguments.n: is a number too large to store"),
    ({"query": float("nan")}, "arguments.query: is a number too large to store"),
    ('{"query": ' + "[" * 10_000 + "]" * 10_000 + "}", "arguments: invalid JSON: nested more than 100 levels deep"),
    ('{"query": ' + "[" * 150 + "]" * 150 + "}", "arguments.query: nested more than 100 levels deep"),
])
def test_arguments_that_are_not_strict_json_are_refused_before_the_schema(arguments, detail):
    with pytest.raises(Refused) as refused:
        validate_arguments(TOOL, arguments)
    assert refused.value.detail.startswith(detail)
    assert refused.value.field == "arguments"


def test_arguments_over_their_size_are_refused_as_text_and_as_an_object(settings):
    settings.TOOL_ARGUMENTS_MAX_BYTES = 1000
    fits = {"query": "é" * 480}  # 960 bytes of UTF-8 in 974 bytes of JSON
    assert validate_arguments(TOOL, fits) == fits
    for big in ({"query": "A" * 2_000_000}, '{"query": "' + "A" * 2_000_000 + '"}', {"query": "é" * 600}):
        with pytest.raises(Refused, match=r"^where: .* bytes of JSON is over the 1,000-byte limit .*"
                                          r"\(TOOL_ARGUMENTS_MAX_BYTES\)\.$") as refused:
            parse_arguments(big, where="where")
        assert refused.value.field == "where"


def test_edge_numbers_and_text_inside_the_rules_are_kept():
    arguments = {"query": "ok \u2028 \U0001f600", "filters": [{"year": 2**63 - 1}, {"year": -(2**63)}]}
    assert parse_arguments(arguments) == arguments
    assert parse_arguments('{"query": "\\ud83d\\ude00", "n": 18446744073709551615}') == {"query": "\U0001f600",
                                                                                       "n": 2**64 - 1}
