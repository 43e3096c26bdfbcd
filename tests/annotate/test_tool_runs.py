"""Tool calls of a response run on the project's MCP servers (the registry's real `mcp-server-time`,
started by the tests), approved, edited or rejected by the annotator, and the next turn answers them;
with auto-approve the stream runs them itself, up to the session's step limit. A tool that is down or
hangs loses nothing."""

import json
import sys

import pytest

from annotate import services, streaming, turns
from annotate.models import Event, EventKind, Node
from dataplatform import tools as mcp
from dataplatform.errors import Refused, Unavailable

from ..doubles import CharBackend
from . import agentic
from .conftest import session_answering

TOKYO, call_text = agentic.TOKYO, agentic.call_text


@pytest.fixture
def backend(use_backend):
    backend = CharBackend(script="It is evening there.")
    use_backend(backend)
    return backend


def test_an_approved_call_runs_on_the_time_server_and_the_next_turn_answers_it(project, members, backend,
                                                                                time_server):
    session = session_answering(project, members, backend)
    root = session.current_node
    assert root.message["finish_reason"] == "tool_calls"
    assert {"tool_name", "tool_arguments"} <= set(root.channels)
    made = turns.run_tool_calls(session=session, version=0, node_id=root.pk, actor=members["annotator"])
    nxt = made.node
    assert nxt.parent_id == root.pk and nxt.operator == EventKind.RUN_TOOL_CALLS and nxt.round == 1
    assistant, result = nxt.context[-2:]
    assert assistant["tool_calls"][0]["function"] == {"name": "get_current_time",
                                                      "arguments": '{"timezone": "Asia/Tokyo"}'}
    assert result["role"] == "tool" and result["tool_call_id"] == assistant["tool_calls"][0]["id"]
    assert json.loads(result["content"])["timezone"] == "Asia/Tokyo"  # the server's real answer
    (record,) = Event.objects.get(node=nxt).payload["calls"]
    assert record["server"] == "time" and record["latency_ms"] > 0 and not record["is_error"]
    list(streaming.continue_node(node=nxt))
    nxt.refresh_from_db()
    assert nxt.message["content"] == "It is evening there." and nxt.status == "complete"


def test_edited_arguments_run_instead_and_are_what_the_context_keeps(project, members, backend, time_server):
    session = session_answering(project, members, backend)
    root = session.current_node
    made = turns.run_tool_calls(session=session, version=0, node_id=root.pk, actor=members["annotator"],
                                decisions=[{"action": "edit", "arguments": {"timezone": "Europe/Paris"}}])
    assistant, result = made.node.context[-2:]
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"timezone": "Europe/Paris"}
    assert json.loads(result["content"])["timezone"] == "Europe/Paris"
    assert made.results[0]["arguments"] == '{"timezone": "Asia/Tokyo"}'  # the model's own, kept beside


def test_arguments_that_break_the_tools_schema_are_refused_before_anything_runs(project, members, backend,
                                                                                 time_server):
    session = session_answering(project, members, backend)
    root = session.current_node
    with pytest.raises(Refused) as refused:
        turns.run_tool_calls(session=session, version=0, node_id=root.pk, actor=members["annotator"],
                             decisions=[{"action": "edit", "arguments": {"zone": "UTC"}}])
    assert "timezone" in str(refused.value)
    assert Node.objects.count() == 1 and Event.objects.filter(kind=EventKind.RUN_TOOL_CALLS).count() == 0


def test_a_rejected_call_runs_nothing_and_tells_the_model_why(project, members, backend, settings):
    settings.MCP_SERVERS = {}
    session = session_answering(project, members, backend, tool_servers=())
    made = turns.run_tool_calls(session=session, version=0, node_id=session.current_node.pk,
                                actor=members["annotator"], decisions=[{"action": "reject", "note": "Ask first."}])
    assert made.node.context[-1]["content"] == "The user rejected this tool call. Their note: Ask first."
    assert made.results[0]["server"] is None


def test_a_tool_no_server_offers_is_refused_by_name(project, members, backend, time_server):
    session = session_answering(project, members, backend, answer=call_text({"city": "Oslo"}, name="get_weather"))
    with pytest.raises(services.ToolRunRefused, match="'get_weather'"):
        turns.run_tool_calls(session=session, version=0, node_id=session.current_node.pk, actor=members["annotator"])


def test_a_server_that_is_down_or_hangs_loses_nothing(project, members, backend, settings, tmp_path):
    silent = tmp_path / "silent.py"
    silent.write_text("import sys\nfor line in sys.stdin:\n    pass\n")
    settings.MCP_SERVERS = {"time": {"command": str(tmp_path / "no-such-server")}}
    settings.MCP_LIST_TIMEOUT_SECONDS = settings.MCP_CALL_TIMEOUT_SECONDS = 1
    mcp.clear_cache()
    session = session_answering(project, members, backend)
    root = session.current_node
    with pytest.raises(Unavailable, match="time"):
        turns.run_tool_calls(session=session, version=0, node_id=root.pk, actor=members["annotator"])
    settings.MCP_SERVERS = {"time": {"command": sys.executable, "args": [str(silent)]}}
    mcp.clear_cache()
    with pytest.raises(Unavailable):
        turns.run_tool_calls(session=session, version=0, node_id=root.pk, actor=members["annotator"])
    session.refresh_from_db()
    assert session.version == 0 and session.current_node_id == root.pk and Node.objects.count() == 1


def test_auto_approve_runs_calls_in_the_stream_until_the_step_limit(project, members, backend, time_server):
    backend.script = call_text({"timezone": "UTC"})  # the model calls the tool every turn
    session = session_answering(project, members, backend)
    config = services.config_for(project)
    config.auto_approve_tools, config.max_tool_steps = True, 2
    config.save()
    first = turns.run_tool_calls(session=session, version=0, node_id=session.current_node.pk,
                                 actor=members["annotator"])
    events = list(streaming.continue_node(node=first.node))
    next_turns = [event for event in events if isinstance(event, turns.NextTurn)]
    assert len(next_turns) == 1  # step 2 ran in the stream; then the limit stops it for the annotator
    last = next_turns[0].node
    last.refresh_from_db()
    assert last.message["tool_calls"] and last.status == "complete"
    assert Event.objects.get(node=last).payload["auto"] is True
    session.refresh_from_db()
    assert session.current_node_id == last.pk
    with pytest.raises(services.ToolRunRefused, match="limit"):
        turns.run_tool_calls(session=session, version=session.version, node_id=last.pk, actor=members["annotator"])
