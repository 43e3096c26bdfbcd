"""Claude Code session logs: the real file read message by message as its source says; threads, sidechains,
errors the agent saw, and what is refused."""

import json

from dataplatform.conversations.readers import read_trace
from tests.real_traces import CLAUDE_CODE, THINKING, expected, lines, read, view


def test_the_real_session_reads_as_its_source_says():
    [(found, trace, problems)] = read(CLAUDE_CODE)
    assert problems == [] and (found.line, found.end) == (1, 25)
    assert view(trace.stored_messages()) == expected(CLAUDE_CODE)
    assistant = trace.conversation.messages[1]
    assert assistant.reasoning == THINKING and assistant.content == "\n\n"  # "\n\n" is the response's first block
    assert [call.name for call in assistant.tool_calls] == ["Bash", "Bash"]  # one response, two parallel calls
    results = trace.stored_messages()[2:]
    assert [m["name"] for m in results] == ["Bash", "Bash"] and [m["is_error"] for m in results] == [False, False]
    assert (trace.trace_id, trace.model, trace.harness, trace.task_id) == (
        "4d5611e5-241a-462a-8d15-5122611a9569", "claude-opus-4-6", "claude-code", "")
    kinds = [event["type"] for event in trace.meta["other_events"]]  # nothing dropped: 2 snapshots, 16 hook events
    assert (kinds.count("file-history-snapshot"), kinds.count("progress"), len(kinds)) == (2, 16, 18)
    assert trace.stored_messages()[1]["signatures"] == ["[REDACTED_SIGNATURE]"]


def entry(uuid, parent, kind, content, **fields):
    message = {"role": kind, "content": content} | ({"id": fields.pop("mid")} if "mid" in fields else {})
    return {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s", "message": message} | fields


def test_sidechains_and_rewound_branches_are_kept_apart_and_errors_kept():
    entries = [
        entry("u1", None, "user", "list files"),
        entry("a1", "u1", "assistant", [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}],
              mid="m1"),
        entry("r1", "a1", "user", [{"type": "tool_result", "tool_use_id": "t1", "content": "denied", "is_error": True}]),
        entry("s1", None, "user", "sub-agent prompt", isSidechain=True, agentId="x"),
        entry("u2", "r1", "user", "first try"),  # rewound: the user sent another prompt after r1
        entry("a2", "u2", "assistant", [{"type": "text", "text": "abandoned"}], mid="m2"),
        entry("u3", "r1", "user", "second try"),
        entry("a3", "u3", "assistant", [{"type": "thinking", "thinking": "ok"}, {"type": "text", "text": "done"}],
              mid="m3"),
    ]
    trace, problems = read_trace({"entries": entries})
    assert problems == []
    assert view(trace.stored_messages()) == [
        ("user", "list files", "", (), ""), ("assistant", "", "", (("t1", "Bash", {"command": "ls"}),), ""),
        ("tool", "denied", "", (), "t1"), ("user", "second try", "", (), ""), ("assistant", "done", "ok", (), "")]
    assert trace.stored_messages()[2]["is_error"] is True
    assert [e["uuid"] for e in trace.meta["sidechains"]] == ["s1"]
    assert [e["uuid"] for e in trace.meta["other_branches"]] == ["u2", "a2"]
    alone, _ = read_trace({"entries": entries[3:4]})  # a sub-agent's own file: its sidechain is the conversation
    assert view(alone.stored_messages()) == [("user", "sub-agent prompt", "", (), "")] and alone.trace_id == "s:x"


def test_an_image_is_refused_by_name_and_a_log_without_turns_is_an_error():
    image = entry("u1", None, "user", [{"type": "image", "source": {}}])
    assert read_trace({"entries": [image]}) == (None, [("entries[0].message.content[0]", (
        "a 'image' block in a user message: only text, thinking, tool_use (assistant) and tool_result (user) "
        "blocks are read, and no block is left out"))])
    _, problems = read_trace({"entries": lines(CLAUDE_CODE)[:6]})  # snapshots and hook events only
    assert problems == [("entries", "must be a non-empty list of message objects")]
    assert json.dumps(read_trace({"entries": [image]})[1]).count("entries[0]") == 1
