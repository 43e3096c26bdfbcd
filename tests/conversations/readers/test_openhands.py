"""OpenHands output lines into the conversation model: the model's responses as assistant turns (once per
response, however many actions it made), observations as tool results, older pair files, bookkeeping kept."""

import json

from dataplatform.conversations.readers import openhands
from tests.trace_fixtures import OPENHANDS, records


def test_a_function_calling_run_is_the_model_s_own_turns_and_their_results():
    record, problems = openhands.read(records(OPENHANDS)[0])
    assert problems == []
    messages = record.conversation.messages
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "tool", "assistant", "tool",
                                          "assistant"]
    assert [tool["function"]["name"] for tool in record.conversation.tools] == [
        "execute_bash", "str_replace_editor", "finish"]  # the system action's tools
    reads = messages[2]  # one response, two parallel calls (two actions): one assistant turn
    assert reads.content == "I'll look at the module and its test first."
    assert reads.reasoning == "Two reads are independent; do them together."
    assert [(c.id, c.name) for c in reads.tool_calls] == [
        ("toolu_01", "str_replace_editor"), ("toolu_02", "execute_bash")]
    assert json.loads(reads.tool_calls[1].arguments) == {"command": "cat tests/test_slugify.py"}  # as written
    assert [(m.tool_call_id, m.name) for m in messages[3:5]] == [("toolu_01", "str_replace_editor"),
                                                                 ("toolu_02", "execute_bash")]
    assert messages[4].content == "def test_plain():\n    assert slugify('a b') == 'a-b'"
    assert (messages[5].content, messages[5].finish_reason) == ("", "tool_calls")
    assert messages[7].tool_calls[0].name == "finish"
    # Each message keeps its events; a response keeps its usage; bookkeeping events are meta.
    assert [event["id"] for event in record.extras[2]["events"]] == [4, 5]
    assert record.extras[2]["response"]["usage"]["total_tokens"] == 940
    assert record.extras[4]["events"][0]["extras"]["metadata"]["exit_code"] == 0
    assert [event.get("action") or event["observation"] for event in record.meta["other_events"]] == [
        "recall", "recall", "agent_state_changed"]
    assert (record.task_id, record.model, record.harness, record.passed) == (
        "textkit__textkit-42", "openai/qwen3-coder", "openhands", True)
    assert record.environment == "princeton-nlp__SWE-bench_Lite-test"
    assert set(record.meta) == {"test_result", "instruction", "metadata", "metrics", "error", "instance",
                                "other_events"}


def test_older_pairs_without_function_calling_become_rebuilt_calls():
    record, problems = openhands.read(records(OPENHANDS)[1])
    assert problems == []
    user, grep, result, finish = record.conversation.messages
    assert user.content == "Fix slugify."
    assert grep.content == "Where is the dash left?"  # the action's thought
    [call] = grep.tool_calls
    assert (call.id, call.name) == ("call_2", "execute_bash")  # OpenHands' own name for a command
    assert json.loads(call.arguments) == {"command": "grep -n strip textkit/slugify.py", "is_confirmed": "confirmed"}
    assert (result.role, result.tool_call_id, result.name) == ("tool", "call_2", "execute_bash")  # by its cause
    assert finish.tool_calls[0].name == "finish" and record.passed is None  # not evaluated


def test_a_bad_line_names_the_image_and_the_response_s_field():
    record, problems = openhands.read(records(OPENHANDS)[2])
    assert record is None
    assert problems == [
        ("history[0].args.image_urls", "images and files are not supported: the platform keeps text only and never "
                                       "drops part of a message"),
        ("history[1].tool_call_metadata.model_response.choices[0].message.tool_calls[0].function.arguments",
         "must be JSON text or an object")]


def test_history_and_ids_are_required():
    assert openhands.read({"history": []})[1] == [("instance_id", "must be a non-empty string"),
                                                  ("history", "must be a non-empty list of events")]
    assert openhands.read({"instance_id": "i", "history": [3, {"source": "agent"}, {"action": 5}]})[1] == [
        ("history[0]", "must be an event object, or an [action, observation] pair"),
        ("history[1]", "must be an action (with `action`) or an observation (with `observation`)"),
        ("history[2].action", "must be the kind of action, a string such as 'run'"),
        ("history", "must be a non-empty list of message objects")]  # none of the events is a message
    only_bookkeeping = [{"source": "environment", "observation": "agent_state_changed", "content": ""}]
    assert openhands.read({"instance_id": "i", "history": only_bookkeeping})[1] == [
        ("history", "must be a non-empty list of message objects")]
