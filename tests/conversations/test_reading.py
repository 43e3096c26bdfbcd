"""Chat messages as real files spell them, read into the one conversation model."""

import json

import pytest

from dataplatform.conversations.model import Message, ToolCall
from dataplatform.conversations.reading import read_conversation


def _one(raw: dict, **extra) -> Message:
    read = read_conversation([{"role": "user", "content": "q"}, raw], **extra)
    assert read.problems == []
    return read.conversation.messages[1]


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning", "thinking"])
def test_every_spelling_of_the_reasoning_is_the_reasoning(key):
    message = _one({"role": "assistant", "content": "4", key: "2 + 2 is 4"})
    assert (message.reasoning, message.content) == ("2 + 2 is 4", "4")


def test_two_spellings_with_different_text_are_a_problem():
    read = read_conversation([{"role": "assistant", "content": "", "reasoning": "a", "reasoning_content": "b"}])
    assert read.conversation is None
    assert read.problems == [("messages[0].reasoning_content", "reasoning_content and reasoning are both given, "
                                                                "with different text")]


def test_arguments_as_an_object_or_as_text_are_the_same_call():
    as_object = _one({"role": "assistant", "content": None,
                      "tool_calls": [{"id": "c1", "function": {"name": "add", "arguments": {"a": 1, "b": 2}}}]})
    as_text = _one({"role": "assistant", "content": None,
                    "tool_calls": [{"id": "c1", "type": "function",
                                    "function": {"name": "add", "arguments": '{"a":1,"b":2}'}}]})
    assert as_object == as_text
    assert as_object.tool_calls == (ToolCall(id="c1", name="add", arguments='{"a":1,"b":2}'),)
    assert as_object.content == ""  # null content beside tool calls


def test_broken_json_arguments_are_kept_as_written():
    call = _one({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": '{"a": 1'}}]}).tool_calls[0]
    assert (call.arguments, call.arguments_object(), call.id) == ('{"a": 1', None, "call_1_0")


def test_text_parts_are_joined_and_any_other_part_is_refused_by_name():
    assert _one({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}).content == "ab"
    read = read_conversation([{"role": "user", "content": [{"type": "text", "text": "look"},
                                                           {"type": "image_url", "image_url": {"url": "x"}}]}])
    assert read.conversation is None and read.problems[0][0] == "messages[0].content[1]"
    assert "'image_url' part" in read.problems[0][1]


def test_tool_results_without_an_id_answer_the_calls_in_order():
    read = read_conversation([
        {"role": "user", "content": "q"},
        {"role": "assistant", "tool_calls": [{"function": {"name": "a", "arguments": "{}"}},
                                             {"function": {"name": "b", "arguments": "{}"}}]},
        {"role": "tool", "content": "A"}, {"role": "tool", "content": "B"}])
    first, second = read.conversation.messages[2:]
    assert (first.tool_call_id, first.name, second.tool_call_id, second.name) == ("call_1_0", "a", "call_1_1", "b")


def test_tools_bare_or_wrapped_become_function_schemas():
    read = read_conversation([{"role": "user", "content": "q"}],
                             tools=[{"name": "a", "parameters": {"type": "object"}},
                                    {"type": "function", "function": {"name": "b"}}])
    assert read.conversation.tools == ({"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}},
                                       {"type": "function", "function": {"name": "b"}})


def test_tools_come_in_the_key_order_the_database_keeps(db):
    """A schema whose keys a file lists in one order reads the same as after a round through the database
    (PostgreSQL's jsonb reorders keys; SQLite keeps them), so both render the same prompt."""
    from annotate.models import Item  # a JSON column of this project's database

    from ..factories import ProjectFactory
    schema = {"function": {"parameters": {"type": "object", "required": ["city"],
                                          "properties": {"city": {"type": "string", "description": "a city"}}},
                           "description": "The weather.", "name": "weather"}, "type": "function"}
    read = read_conversation([{"role": "user", "content": "q"}], tools=[schema]).conversation.tools
    item = Item.objects.create(project=ProjectFactory(), messages=[], tools=list(read), source_sha256="0" * 64)
    item.refresh_from_db()
    again = read_conversation([{"role": "user", "content": "q"}], tools=item.tools).conversation.tools
    assert json.dumps(read) == json.dumps(again) == json.dumps(
        read_conversation([{"role": "user", "content": "q"}], tools=[json.loads(json.dumps(schema, sort_keys=True))])
        .conversation.tools)
    assert list(read[0]) == ["type", "function"] and list(read[0]["function"]) == ["name", "parameters", "description"]


@pytest.mark.parametrize(("raw", "where"), [
    ({"role": "robot", "content": "x"}, "messages[0].role"),
    ({"role": "user", "content": 5}, "messages[0].content"),
    ({"role": "user", "content": "x", "tool_calls": [{"function": {"name": "f"}}]}, "messages[0].tool_calls"),
    ({"role": "assistant", "tool_calls": [{"function": {"name": ""}}]}, "messages[0].tool_calls[0].function.name"),
    ({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 5}}]},
     "messages[0].tool_calls[0].function.arguments"),
    ({"role": "assistant", "content": "x", "finish_reason": 3}, "messages[0].finish_reason"),
    ({"role": "tool", "content": "x", "tool_call_id": 7}, "messages[0].tool_call_id"),
])
def test_each_problem_names_its_field(raw, where):
    read = read_conversation([raw])
    assert read.conversation is None and [field for field, _ in read.problems] == [where]


def test_the_stored_shape_and_the_training_shape():
    conversation = read_conversation(
        [{"role": "user", "content": "add"},
         {"role": "assistant", "reasoning": "use the tool", "content": None, "finish_reason": "tool_calls",
          "tool_calls": [{"id": "c", "function": {"name": "add", "arguments": '{"a": 1}'}}]},
         {"role": "tool", "tool_call_id": "c", "content": "1"}]).conversation
    stored = conversation.as_dict()["messages"][1]
    assert stored == {"role": "assistant", "content": "", "reasoning": "use the tool", "finish_reason": "tool_calls",
                      "tool_calls": [{"id": "c", "type": "function",
                                      "function": {"name": "add", "arguments": '{"a": 1}'}}]}
    assert read_conversation(conversation.as_dict()["messages"]).conversation == conversation  # it reads itself
    trained = conversation.for_training()[1]
    assert trained["reasoning_content"] == "use the tool" and "finish_reason" not in trained
    assert trained["tool_calls"][0]["function"]["arguments"] == {"a": 1}  # what chat templates expect
