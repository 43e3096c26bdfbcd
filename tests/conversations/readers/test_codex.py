"""Codex CLI rollouts: the real file read message by message as its source says; a response's reasoning, calls
and outputs; the older rollout lines."""

from dataplatform.conversations.readers import read_trace
from tests.real_traces import CODEX, expected, read, view


def test_the_real_rollout_reads_as_its_source_says():
    [(found, trace, problems)] = read(CODEX)
    assert problems == [] and (found.line, found.end) == (1, 11)
    assert view(trace.stored_messages()) == expected(CODEX)
    assert trace.stored_messages()[0]["role_in_source"] == "developer"
    assert (trace.trace_id, trace.model, trace.harness) == ("019e9625-802f-7e91-840a-cfe88d14117a", "gpt-5.5", "codex")
    assert [line["payload"].get("type", line["type"]) for line in trace.meta["other_events"]] == [
        "task_started", "turn_context", "user_message", "agent_message", "token_count", "task_complete"]
    assert trace.meta["session_meta"]["cli_version"] == "0.135.0"


def item(payload):
    return {"timestamp": "t", "type": "response_item", "payload": payload}


def test_one_response_is_one_turn_with_its_reasoning_calls_and_outputs():
    entries = [{"type": "session_meta", "payload": {"id": "r1", "model": "gpt-5"}},
               item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]}),
               item({"type": "reasoning", "summary": [{"type": "summary_text", "text": "**Look**"}], "content": None,
                     "encrypted_content": "gAAA"}),
               item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Looking."}]}),
               item({"type": "function_call", "name": "shell", "arguments": '{"command":["ls"]}', "call_id": "c1"}),
               item({"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "c2"}),
               item({"type": "function_call_output", "call_id": "c1", "output": "a.py"}),
               item({"type": "custom_tool_call_output", "call_id": "c2", "output": "Exit code: 1"}),
               item({"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "again"}]}),
               item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]})]
    trace, problems = read_trace({"entries": entries})
    assert problems == []
    stored = trace.stored_messages()
    assert [(m["role"], m["content"], m.get("reasoning", "")) for m in stored] == [
        ("user", "fix it", ""), ("assistant", "Looking.", "**Look**"), ("tool", "a.py", ""),
        ("tool", "Exit code: 1", ""), ("assistant", "Done.", "again")]
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in stored[1]["tool_calls"]] == [
        ("shell", '{"command":["ls"]}'), ("apply_patch", "*** Begin Patch")]  # the patch as its raw input
    assert stored[1]["items"][0]["encrypted_content"] == "gAAA" and stored[2]["name"] == "shell"


def test_older_rollouts_and_images():
    old = [{"id": "o1", "timestamp": "t", "instructions": None}, {"record_type": "state"},
           {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
           {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]}]
    trace, _ = read_trace({"entries": old})
    assert (trace.trace_id, view(trace.stored_messages())) == ("o1", [("user", "hi", "", (), ""),
                                                                      ("assistant", "hello", "", (), "")])
    image = item({"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "x"}]})
    assert read_trace({"entries": [image]})[1] == [("entries[0].payload.content[0]", (
        "a 'input_image' part: only text is supported, and a message is never imported with a part left out"))]
