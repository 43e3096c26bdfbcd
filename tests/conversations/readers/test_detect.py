"""Telling a record's trace format from its keys, and reading it with that format's reader."""

import pytest

from dataplatform.conversations.readers import detect, read_trace
from dataplatform.conversations.readers.detect import UNKNOWN
from tests.trace_fixtures import OPENAI, OPENHANDS, SWE_AGENT, SWE_AGENT_TRAJ, SWE_LABELER, records


@pytest.mark.parametrize(("name", "expected"), [
    (SWE_AGENT_TRAJ, "swe_agent"), (SWE_AGENT, "swe_agent"), (OPENHANDS, "openhands"), (OPENAI, "openai"),
    (SWE_LABELER, "swe_labeler"),
])
def test_every_fixture_record_is_told_by_its_keys(name, expected):
    assert {detect(record) for record in records(name)} == {expected}


def test_edge_shapes_and_unknown_records():
    assert detect({"history": [[{"action": "run"}, {"observation": "run"}]]}) == "openhands"  # older pairs
    assert detect({"trajectory": []}) == "swe_agent"
    assert detect({"messages": [], "scaffold": "x"}) == "swe_labeler"
    assert detect({"steps": []}) is None
    assert read_trace({"prompt": "x"}) == (None, [("(line)", UNKNOWN)])


def test_a_record_without_a_task_takes_the_one_given():
    record, _ = read_trace(records(SWE_AGENT_TRAJ)[0], task_id="textkit__textkit-42")
    assert (record.task_id, record.origins["task_id"]) == ("textkit__textkit-42", "(file name)")
    named, _ = read_trace(records(SWE_AGENT)[0], task_id="other")
    assert named.task_id == "textkit__textkit-42"  # its own instance_id wins


def test_the_new_formats_are_told_by_their_keys():
    assert detect({"entries": [{"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}]}) == "claude_code"
    assert detect({"entries": [{"type": "session_meta", "payload": {}}]}) == "codex"
    assert detect({"entries": [{"id": "o", "timestamp": "t", "instructions": None}]}) == "codex"
    assert detect({"entries": [{"other": 1}]}) is None
    assert detect({"task_id": 0, "reward": 1.0, "traj": []}) == "tau_bench"
    assert detect({"messages": [], "trajectory_format": "mini-swe-agent-1"}) == "mini_swe_agent"
    assert detect({"messages": [], "info": {"mini_version": "1.7.0"}}) == "mini_swe_agent"
