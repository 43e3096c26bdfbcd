"""The shared part of the readers: problems named by the record's own paths, ids, the stored shape."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from dataplatform.conversations.model import Conversation, Message, ToolCall
from dataplatform.conversations.readers import openai
from dataplatform.conversations.readers.base import Built, TraceRecord, conversation_of, dig
from dataplatform.conversations.reading import read_conversation


def test_problems_of_built_messages_are_named_by_where_they_come_from():
    built = [Built({"role": "user", "content": "q"}, "events[0].args"),
             Built({"role": "assistant", "content": 5}, "events[3].response.message")]
    problems = []
    assert conversation_of(built, problems, list_path="events") is None
    assert problems == [("events[3].response.message.content", "must be a string, null, or a list of content parts")]
    problems = []
    conversation_of([], problems, list_path="events")
    assert problems == [("events", "must be a non-empty list of message objects")]


def test_ids_stored_messages_and_digging():
    built = [Built({"role": "user", "content": "q"}, "m[0]", {"event": 1})]
    conversation = conversation_of(built, [], list_path="m")
    record = TraceRecord("openai", conversation, extras=({"event": 1},), task_id="t-1")
    assert record.id_or("f" * 64) == "t-1-ffffffffffff"
    assert record.stored_messages() == [{"event": 1, "role": "user", "content": "q"}]
    assert dig({"a": [{"b": 2}]}, "a", 0, "b") == 2 and dig({"a": []}, "a", 0, "b") is None


text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=10)
ids = st.text(st.characters(min_codepoint=48, max_codepoint=122), min_size=1, max_size=6)
calls = st.lists(st.builds(ToolCall, id=ids, name=ids, arguments=st.one_of(text, st.dictionaries(
    ids, st.integers() | text, max_size=2).map(json.dumps))), max_size=2).map(tuple)
messages = st.one_of(
    st.builds(Message, role=st.sampled_from(["system", "user"]), content=text),
    st.builds(Message, role=st.just("assistant"), content=text, reasoning=text, tool_calls=calls,
              finish_reason=st.none() | st.sampled_from(["stop", "tool_calls", "length"])),
    st.builds(Message, role=st.just("tool"), content=text, tool_call_id=ids, name=st.just("") | ids))
tools = st.lists(st.builds(lambda name, description: {"type": "function", "function": {
    "name": name, "description": description}}, ids, text), max_size=2).map(tuple)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(conversation=st.builds(Conversation, messages=st.lists(messages, min_size=1, max_size=6).map(tuple),
                              tools=tools))
def test_the_stored_messages_read_back_as_the_same_conversation(conversation):
    """What the importers store (`stored_messages`) is what swe.trajectories and the AED rows read again."""
    record, problems = openai.read({"messages": [m.as_dict() for m in conversation.messages],
                                    "tools": list(conversation.tools)})
    assert problems == [] and record.conversation == conversation
    assert read_conversation(record.stored_messages(), list(conversation.tools)).conversation == conversation
