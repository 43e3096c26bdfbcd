"""SWE-agent trajectories into the conversation model: function calling as written, text actions as bash calls,
trajectory steps when there is no history, thinking blocks as reasoning, the rest as meta."""

import json

from dataplatform.conversations.readers import swe_agent
from tests import real_traces as real
from tests.trace_fixtures import SWE_AGENT, SWE_AGENT_TRAJ, records


def test_function_calling_history_is_the_conversation_with_its_calls_as_written():
    record, problems = swe_agent.read(records(SWE_AGENT_TRAJ)[0])
    assert problems == []
    system, user, find, found, submit, diff = record.conversation.messages
    assert (system.role, user.role) == ("system", "user") and user.content.startswith("We're currently solving")
    assert [(call.id, call.name, call.arguments) for call in find.tool_calls] == [
        ("call_a1", "find_file", '{"file_name":"slugify.py"}')]
    assert find.content == "Let me find the file that defines slugify."  # the thought, written in the open
    assert find.reasoning == "The issue names slugify; find its module first."  # the thinking blocks
    assert (found.role, found.tool_call_id, diff.tool_call_id) == ("tool", "call_a1", "call_a2")
    assert submit.tool_calls[0].name == "submit"
    # The source's own fields stay beside each message; the thought equal to the content is not repeated.
    assert record.extras[2] == {"agent": "main", "message_type": "action"}
    assert (record.harness, record.model, record.environment, record.passed) == (
        "swe-agent", "claude-sonnet-4", "main", None)
    assert set(record.meta) == {"info", "replay_config", "trajectory"}
    assert all("query" not in step for step in record.meta["trajectory"])  # it repeats the history
    assert record.task_id == ""  # a .traj names no task: the file's name does (see documents)


def test_text_actions_become_bash_calls_answered_by_the_next_observation():
    record, problems = swe_agent.read(records(SWE_AGENT)[0])
    assert problems == []
    messages = record.conversation.messages
    assert [m.role for m in messages] == ["system", "user", "user", "assistant", "tool", "assistant", "tool"]
    reproduce, output = messages[3], messages[4]
    assert reproduce.content == "First I will reproduce the bug.\n\n"
    [call] = reproduce.tool_calls
    assert (call.name, json.loads(call.arguments)) == (
        "bash", {"command": "python -c \"from textkit import slugify; print(slugify('a b '))\"\n"})
    assert (output.tool_call_id, output.name) == (call.id, "bash") and output.content.startswith("a-b-")
    # The model's whole text stays beside the message; the demonstration keeps its flag.
    assert record.extras[3]["response"].endswith("```")
    assert record.extras[1] == {"agent": "primary", "is_demo": True}
    assert (record.task_id, record.environment) == ("textkit__textkit-42", "swe_main")


def test_trajectory_steps_follow_the_prompt_of_the_first_query():
    record, problems = swe_agent.read(records(SWE_AGENT)[1])
    assert problems == []
    messages = record.conversation.messages
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert json.loads(messages[2].tool_calls[0].arguments) == {"command": "ls -F\n"}
    assert messages[3].content == "README.md\ntextkit/\n"
    assert messages[4].content == "I give up." and messages[4].tool_calls == ()  # no action: no call, no result
    assert record.extras[2]["state"] == {"working_dir": "/textkit"} and "query" not in record.extras[2]


def test_a_bad_record_names_each_field_in_the_history():
    record, problems = swe_agent.read(records(SWE_AGENT)[2])
    assert record is None
    assert problems == [("history[1].tool_calls[0].function.name", "must be a non-empty string"),
                        ("history[2].role", "must be one of system, user, assistant, tool")]


def test_tool_call_ids_must_name_the_one_call_answered_and_thinking_blocks_be_a_list():
    history = [{"role": "user", "content": "q"},
               {"role": "assistant", "content": "", "thinking_blocks": "hmm",
                "tool_calls": [{"id": "c", "function": {"name": "ls", "arguments": "{}"}}]},
               {"role": "tool", "content": "x", "tool_call_ids": ["c", "d"]}]
    assert swe_agent.read({"history": history})[1] == [
        ("history[1].thinking_blocks", "must be a list of thinking blocks {type: thinking, thinking: text}"),
        ("history[2].tool_call_ids", "must be a list holding the one call id this result answers")]


def test_redacted_thinking_is_kept_beside_the_message():
    blocks = [{"type": "thinking", "thinking": "a"}, {"type": "redacted_thinking", "data": "xyz"}]
    history = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "ok", "thinking_blocks": blocks}]
    record, _ = swe_agent.read({"history": history})
    assert record.conversation.messages[1].reasoning == "a" and record.extras[1] == {"thinking_blocks": blocks}


def test_neither_history_nor_trajectory_steps():
    assert swe_agent.read({"info": {}})[1] == [("history", "must be a non-empty list of message objects")]
    assert swe_agent.read({"trajectory": ["ls"]})[1] == [
        ("trajectory[0]", "must be an object with thought, action and observation"),
        ("trajectory", "must be a non-empty list of message objects")]


def test_swe_agent_s_own_1_0_trajectory_reads_whole_its_closing_submit_included():
    """SWE-agent's test trajectory (tests/fixtures/real): its history holds four of the five steps; the last,
    `submit`, is only in `trajectory`, and is read after the history rather than left in meta."""
    [(found, record, problems)] = real.read(real.SWE_AGENT_1)
    assert problems == [] and record.task_id == found.name == "6e44b9__sweagenttestrepo-1c2844"
    assert real.view(record.stored_messages()) == real.expected(real.SWE_AGENT_1)
    source = json.loads(real.body(real.SWE_AGENT_1))
    messages = record.conversation.messages
    assert [call.name for message in messages for call in message.tool_calls] == [
        "find_file", "open", "edit", "bash", "bash"]  # four as the model wrote them, the submit step rebuilt
    submit, diff = messages[-2:]
    assert submit.content == source["trajectory"][4]["thought"]
    assert json.loads(submit.tool_calls[0].arguments) == {"command": "submit"}
    assert (diff.tool_call_id, diff.content) == (submit.tool_calls[0].id, source["info"]["submission"])
    assert record.extras[-2]["trajectory_step"] == 4 and record.extras[-1] == {"trajectory_step": 4}
    assert (record.model, record.environment, record.passed) == ("gpt-4o", "main", None)
    assert record.meta["info"]["exit_status"] == "submitted" and len(record.meta["trajectory"]) == 5


def test_a_0_x_trajectory_reads_whole_with_the_failed_edits_the_agent_read():
    """SWE-agent's 0.x test trajectory (tests/fixtures/real): text actions become bash calls, each answered by the
    observation after it, the three edits its linter refused among them, as the model read them."""
    [(found, record, problems)] = real.read(real.SWE_AGENT_0)
    assert problems == [] and record.task_id == found.name == "pydicom__pydicom-1458"
    assert real.view(record.stored_messages()) == real.expected(real.SWE_AGENT_0)
    source = json.loads(real.body(real.SWE_AGENT_0))
    messages = record.conversation.messages
    assert [m.role for m in messages[:3]] == ["system", "user", "user"] and record.extras[1]["is_demo"] is True
    calls = [call for message in messages for call in message.tool_calls]
    assert [json.loads(call.arguments)["command"] for call in calls] == [
        step["action"] for step in source["trajectory"]]  # every step of the run, `submit` the last
    refused = [m for m in messages if m.role == "tool" and m.content.startswith("Your proposed edit has introduced")]
    assert len(refused) == 3 and all(m.tool_call_id for m in refused)  # the model read each refusal
    assert "E999 SyntaxError: unmatched ']'" in refused[0].content
    assert (record.model, record.environment, record.passed) == ("", "swe_main", None)  # 0.x names no model here
    assert record.meta["info"]["exit_status"] == "submitted"
