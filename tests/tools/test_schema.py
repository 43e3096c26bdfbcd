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
