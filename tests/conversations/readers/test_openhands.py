"""OpenHands output lines into the conversation model: the model's responses as assistant turns (once per
response, however many actions it made), observations as tool results, older pair files, bookkeeping kept."""

import json

from dataplatform.conversations.readers import openhands
from tests import real_openhands, real_traces
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


def test_history_is_required_and_a_task_optional():
    assert openhands.read({"history": []})[1] == [("history", "must be a non-empty list of events")]
    assert openhands.read({"instance_id": " ", "history": []})[1] == [
        ("instance_id", "must be a non-empty string"), ("history", "must be a non-empty list of events")]
    assert openhands.read({"history": [3, {"source": "agent"}, {"action": 5}]})[1] == [
        ("history[0]", "must be an event object, or an [action, observation] pair"),
        ("history[1]", "must be an action (with `action`) or an observation (with `observation`)"),
        ("history[2].action", "must be the kind of action, a string such as 'run'"),
        ("history", "must be a non-empty list of message objects")]  # none of the events is a message
    only_bookkeeping = [{"source": "environment", "observation": "agent_state_changed", "content": ""}]
    assert openhands.read({"history": only_bookkeeping})[1] == [
        ("history", "must be a non-empty list of message objects")]


def test_actions_that_read_to_no_turn_refuse_the_record_rather_than_import_it_empty():
    """Flat events of kinds the reader does not take as tool actions: kept outside, so nothing the agent did is
    left in the conversation, and the record is refused saying so."""
    history = [{"content": "Fix the license.", "action": "message"},
               {"thought": "", "action": "change_agent_state", "agent_state": "running"},
               {"code": "print(1)", "thought": "", "action": "run_ipython"},
               {"content": "1", "observation": "run_ipython"}]
    record, problems = openhands.read({"issue": {"number": 5}, "history": history})
    assert record is not None and record.task_id == "#5"
    assert record.outside == {"change_agent_state action": 1}
    unread = history[:2] + [{"outputs": {}, "thought": "", "action": "finish_by_email"}]
    assert openhands.read({"issue": {"number": 5}, "history": unread})[1] == [
        ("history", "the source records 2 actions of the agent, but no assistant turn read from them has text, "
                    "reasoning or a tool call")]
    assert openhands.read({"id": 7, "history": [{"content": "", "action": "message"}] + history[2:]})[1] == [
        ("history", "reads to no user turn with text: the task the agent was given is missing")]


# --- the real files ---------------------------------------------------------------------------------------------

def seen(message) -> tuple:
    """A message as the tests compare it: role, text, reasoning, calls (id, name, arguments parsed), result's call."""
    return (message.role, message.content, message.reasoning,
            [(call.id, call.name, json.loads(call.arguments)) for call in message.tool_calls], message.tool_call_id)


def test_events_of_2025_read_message_by_message_with_the_error_observation_the_agent_saw():
    [source] = real_openhands.records(real_openhands.EVENTS_2025)
    record, problems = openhands.read(source)
    assert problems == []
    assert [seen(m) for m in record.conversation.messages] == [
        (role, content, reasoning, list(calls), call_id)
        for role, content, reasoning, calls, call_id in real_traces.expected(real_traces.OPENHANDS_2025)]
    # The malformed call OpenHands refused answered no call: it is the user turn the model read, not meta.
    [error] = [event for event in source["history"] if event.get("observation") == "error"]
    refused = record.conversation.messages[26]
    assert (refused.role, refused.content) == ("user", error["content"])
    assert refused.content.startswith("Parameter 'command' is expected to be one of")
    assert record.extras[26]["events"][0]["id"] == error["id"] == 29
    assert sum(len(m.tool_calls) for m in record.conversation.messages) == 33
    assert record.outside == {"recall action": 1, "recall observation": 1}  # the workspace context
    assert (record.task_id, record.model, record.passed) == (source["instance_id"],
                                                             "openai/openrouter-llama-4-maverick", None)
    assert [tool["function"]["name"] for tool in record.conversation.tools] == [
        "execute_bash", "think", "finish", "str_replace_editor"]
    assert record.environment == source["metadata"]["dataset"] and record.harness == "openhands"


def test_pairs_of_2024_read_message_by_message_with_their_null_observations_kept_outside():
    for source in real_openhands.records(real_openhands.PAIRS_2024):
        expected, nulls = [], 0
        for action, observation in source["history"]:
            args = action["args"]
            if action["action"] == "message":
                expected.append(("user" if action["source"] == "user" else "assistant", args["content"], "", [], ""))
            else:
                name = {"run_ipython": "execute_ipython_cell"}.get(action["action"], action["action"])
                arguments = {key: value for key, value in args.items() if key != "thought"}
                expected.append(("assistant", args["thought"], "", [(f"call_{action['id']}", name, arguments)], ""))
            if observation["observation"] == "null":  # "No observation": never shown to the model
                nulls += 1
            else:
                assert observation["cause"] == action["id"]
                expected.append(("tool", observation["content"], "", [], f"call_{action['id']}"))
        record, problems = openhands.read(source)
        assert problems == [] and [seen(m) for m in record.conversation.messages] == expected
        assert record.outside == {"null observation": nulls} and nulls == len(source["history"])
        # gorilla names its run `question_id` and its verdict `correct`: neither is a task or outcome the reader knows
        assert (record.task_id, record.passed, record.origins["passed"]) == ("", None, "")
        assert record.model == source["metadata"]["model_name"] == "gpt-4o-2024-05-13"


def test_the_resolver_s_flat_events_read_with_their_actions_as_tool_calls():
    for source, calls in zip(real_openhands.records(real_openhands.RESOLVER), (4,), strict=True):
        expected = [("user", source["history"][0]["content"], "", [], "")]
        for index, event in enumerate(source["history"][1:], start=1):
            if "action" in event:
                name = {"run": "execute_bash", "run_ipython": "execute_ipython_cell"}.get(event["action"],
                                                                                           event["action"])
                arguments = {key: value for key, value in event.items() if key not in ("action", "thought")}
                expected.append(("assistant", event["thought"], "", [(f"call_{len(expected)}", name, arguments)], ""))
            else:  # the result of the action before it: the file records no links
                expected.append(("tool", event["content"], "", [], expected[index - 1][3][0][0]))
        record, problems = openhands.read(source)
        assert problems == [] and [seen(m) for m in record.conversation.messages] == expected
        assert sum(len(m.tool_calls) for m in record.conversation.messages) == calls
        issue = source["issue"]
        assert record.task_id == f"{issue['owner']}/{issue['repo']}#{issue['number']}" and record.passed is True
        assert record.meta["issue"] == issue and record.outside == {}
        assert record.extras[2]["events"][0]["extras"]["exit_code"] == 0  # what the run observation recorded
