"""The shared part of the readers: problems named by the record's own paths, ids, the stored shape."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from dataplatform.conversations.model import Conversation, Message, ToolCall
from dataplatform.conversations.readers import openai
from dataplatform.conversations.readers.base import Built, TraceRecord, conversation_of, dig, outcome
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


def test_a_conversation_without_its_task_or_with_only_empty_turns_is_refused_naming_what_is_missing():
    def problems_of(built, **options):
        problems = []
        conversation_of(built, problems, list_path="history", **options)
        return problems

    task, empty = Built({"role": "user", "content": "Fix it."}, "h[0]"), Built({"role": "assistant", "content": ""}, "h[1]")
    assert problems_of([Built({"role": "assistant", "content": "done"}, "h[0]")]) == [
        ("history", "reads to no user turn with text: the task the agent was given is missing")]
    assert problems_of([task, empty]) == [
        ("history", "the source records 1 action of the agent, but no assistant turn read from it has text, "
                    "reasoning or a tool call")]
    assert problems_of([task], actions=21) == [  # 21 actions that became no assistant turn at all
        ("history", "the source records 21 actions of the agent, but no assistant turn read from them has text, "
                    "reasoning or a tool call")]
    assert problems_of([task, empty, Built({"role": "assistant", "content": "", "reasoning": "hm"}, "h[2]")]) == []
    assert problems_of([task]) == []  # a prompt without an answer is no trace of an agent, but nothing was lost


def test_the_outcome_is_read_from_each_format_s_own_field():
    assert outcome({"test_result": {"report": {"resolved": False}, "result": True}}) == (
        False, None, "test_result.report.resolved")
    assert outcome({"test_result": {"result": True, "git_patch": "diff"}}) == (True, None, "test_result.result")
    assert outcome({"success": True, "test_result": {"git_patch": "diff"}}) == (True, None, "success")
    assert outcome({"reward": 1.0}) == (True, 1.0, "reward") and outcome({"reward": 0}) == (False, 0.0, "reward")
    assert outcome({"reward": True, "success": "yes"}) == outcome({}) == (None, None, "")


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


def _readable(conversation: Conversation) -> bool:
    """What a reader takes: a user turn with text, and an assistant turn that says something when there is one."""
    messages = conversation.messages
    assistants = [m for m in messages if m.role == "assistant"]
    return any(m.role == "user" and m.content.strip() for m in messages) and (
        not assistants or any(m.content.strip() or m.reasoning.strip() or m.tool_calls for m in assistants))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(conversation=st.builds(Conversation, messages=st.lists(messages, max_size=6).map(
    lambda drawn: (Message(role="user", content="the task"), *drawn)), tools=tools).filter(_readable))
def test_the_stored_messages_read_back_as_the_same_conversation(conversation):
    """What the importers store (`stored_messages`) is what swe.trajectories and the AED rows read again."""
    record, problems = openai.read({"messages": [m.as_dict() for m in conversation.messages],
                                    "tools": list(conversation.tools)})
    assert problems == [] and record.conversation == conversation
    assert read_conversation(record.stored_messages(), list(conversation.tools)).conversation == conversation
