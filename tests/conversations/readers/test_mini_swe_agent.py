"""mini-swe-agent: the messages array its tests save, read message by message; a saved trajectory (2.x) with
its exit message kept out of the conversation."""

from dataplatform.conversations.readers import detect, read_trace
from tests.real_traces import MINI_SWE_AGENT, MINI_SWE_AGENT_1, MINI_SWE_AGENT_2, expected, read, view


def test_the_real_messages_array_reads_as_its_source_says():
    [(found, trace, problems)] = read(MINI_SWE_AGENT)
    assert problems == [] and (found.line, found.name, trace.format) == (2, "local", "openai")
    assert view(trace.stored_messages()) == expected(MINI_SWE_AGENT)  # the action stays in the text, as written


def test_a_saved_trajectory_keeps_its_exit_message_in_meta():
    record = {"info": {"mini_version": "2.0.0", "config": {"model": {"model_name": "claude-sonnet-4"}}},
              "trajectory_format": "mini-swe-agent-1.1", "instance_id": "x__y-1",
              "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "task"},
                           {"role": "assistant", "content": "ls\n```bash\nls\n```", "extra": {"actions": [
                               {"command": "ls"}]}},
                           {"role": "exit", "content": "", "extra": {"exit_status": "Submitted", "submission": ""}}]}
    assert detect(record) == "mini_swe_agent"
    trace, problems = read_trace(record)
    assert problems == [] and [m.role for m in trace.conversation.messages] == ["system", "user", "assistant"]
    assert (trace.task_id, trace.model, trace.meta["exit"][0]["extra"]["exit_status"]) == (
        "x__y-1", "claude-sonnet-4", "Submitted")
    assert trace.stored_messages()[2]["extra"] == {"actions": [{"command": "ls"}]}


def test_trajectories_mini_swe_agent_saved_read_as_their_source_says():
    [(_, current, problems)] = read(MINI_SWE_AGENT_2)
    assert problems == [] and view(current.stored_messages()) == expected(MINI_SWE_AGENT_2)
    failed = current.stored_messages()[3]  # the failed command's result, as the model read it
    assert (failed["role"], failed["extra"]["returncode"]) == ("tool", 1) and '"returncode": 1' in failed["content"]
    assert (current.task_id, current.meta["exit"][0]["extra"]["exit_status"]) == ("list-files", "Submitted")
    assert current.meta["info"]["mini_version"] == "2.4.6"
    [(_, older, problems)] = read(MINI_SWE_AGENT_1)
    assert problems == [] and view(older.stored_messages()) == expected(MINI_SWE_AGENT_1)
    assert (older.task_id, older.origins["task_id"], older.meta["trajectory_format"]) == (
        "list-files", "instance_id", "mini-swe-agent-1")
