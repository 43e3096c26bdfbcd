"""OpenAI chat records with tool calls into the conversation model."""

from dataplatform.conversations.readers import openai
from tests.trace_fixtures import OPENAI, records


def test_tool_calls_reasoning_and_tools_are_read_and_the_rest_kept():
    record, problems = openai.read(records(OPENAI)[0])
    assert problems == []
    _, _, call, result, answer = record.conversation.messages
    assert (call.content, call.reasoning) == ("", "Search the module for its return.")
    assert [(c.id, c.name, c.arguments) for c in call.tool_calls] == [
        ("call_g1", "bash", '{"command": "grep -n return textkit/slugify.py"}')]
    assert (result.tool_call_id, answer.finish_reason) == ("call_g1", "stop")
    assert record.conversation.tools[0]["function"]["name"] == "bash"
    assert (record.trace_id, record.task_id, record.model) == ("chat-1", "textkit__textkit-42", "qwen3-8b")
    assert record.meta == {"metadata": {"source": "eval-3"}}


def test_a_record_without_an_id_is_named_from_its_content():
    record, _ = openai.read(records(OPENAI)[1])
    assert record.conversation.messages[1].reasoning == "A greeting."  # spelled `thinking`
    assert (record.trace_id, record.id_or("ab" * 32)) == ("", "openai-abababababab")


def test_a_message_keeps_its_other_fields_and_a_bad_call_is_named():
    record, _ = openai.read({"messages": [{"role": "user", "content": "q", "weight": 0}]})
    assert record.extras == ({"weight": 0},) and record.stored_messages() == [
        {"weight": 0, "role": "user", "content": "q"}]
    assert openai.read(records(OPENAI)[2]) == (None, [("messages[1].tool_calls[0].function.arguments",
                                                       "must be JSON text or an object")])
    assert openai.read({"messages": "hi", "id": 3})[1] == [("id", "must be a string"),
                                                          ("messages", "must be a non-empty list of message objects")]
