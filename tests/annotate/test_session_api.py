"""The session operators over the API: each one's answer, its refusals (stale version, bad fields, a tool
that is down), the stream's channels and its `turn` event, and the settings only admins may change.
Who may call each endpoint is the role matrix's (tests/test_role_matrix.py)."""

import json

import pytest

from annotate import services
from annotate.models import Event, EventKind, Node
from dataplatform import tools as mcp

from ..conftest import api_client_for
from ..doubles import CharBackend
from . import agentic
from .conftest import session_answering
from .streams import events_of


def url(session, action: str) -> str:
    return f"/api/v1/sessions/{session.pk}/{action}/"


@pytest.fixture
def client(members):
    return api_client_for(members["annotator"])


def test_every_operator_answers_with_the_node_it_made(reasoning_session, client):
    root = reasoning_session.current_node
    start = agentic.REASONING_ANSWER.index("an umbrella")
    edited = client.post(url(reasoning_session, "edit-selection"), {"version": 0, "node_id": root.pk, "start": start,
                                                          "end": start + 2, "text": "one"}, format="json")
    assert edited.status_code == 201, edited.content
    body = edited.json()
    assert body["operator"] == "edit_selection" and body["session_version"] == 1
    assert body["message"]["content"] == "Take one umbrella." and "reasoning" in body["channels"]
    new_round = client.post(url(reasoning_session, "new-round"), {"version": 1, "node_id": body["id"], "text": "Why?"},
                            format="json")
    assert new_round.status_code == 201 and new_round.json()["round"] == 2
    assert new_round.json()["context"][-1] == {"role": "user", "content": "Why?"}
    node_id = new_round.json()["id"]
    streamed = events_of(client.post(f"/api/v1/sessions/{reasoning_session.pk}/nodes/{node_id}/stream/"))
    # The model's end token is the template's (a marker); everything it wrote is content.
    assert streamed[-1][0] == "done" and {payload["channel"] for name, payload in streamed if name == "token"} \
        == {"content", "marker"}
    again = client.post(url(reasoning_session, "generate-new"), {"version": 2}, format="json")
    assert again.status_code == 201 and again.json()["tree"] == 2 and again.json()["parent"] is None
    events_of(client.post(f"/api/v1/sessions/{reasoning_session.pk}/nodes/{again.json()['id']}/stream/"))
    prompt = client.post(url(reasoning_session, "edit-prompt"), {"version": 3, "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Coat?"}]}, format="json")
    assert prompt.status_code == 201 and prompt.json()["tree"] == 3
    events_of(client.post(f"/api/v1/sessions/{reasoning_session.pk}/nodes/{prompt.json()['id']}/stream/"))
    moved = client.post(url(reasoning_session, "select"), {"version": 4, "node_id": root.pk}, format="json")
    assert moved.status_code == 200 and moved.json()["current_node"]["id"] == root.pk
    trees = {node["tree"] for node in moved.json()["nodes"]}
    assert trees == {1, 2, 3}
    kinds = list(Event.objects.filter(session=reasoning_session).values_list("kind", flat=True))
    assert kinds == ["generate_new", "edit_selection", "start_new_round", "generate_new", "edit_prompt",
                     "select_node"]


def test_a_stale_version_or_a_bad_field_is_refused_and_changes_nothing(reasoning_session, client):
    root = reasoning_session.current_node
    stale = client.post(url(reasoning_session, "new-round"), {"version": 5, "node_id": root.pk, "text": "x"}, format="json")
    assert stale.status_code == 409
    bad = client.post(url(reasoning_session, "edit-prompt"), {"version": 0, "messages": [{"role": "robot"}]}, format="json")
    assert bad.status_code == 400 and "messages" in bad.json()
    outside = client.post(url(reasoning_session, "edit-selection"), {"version": 0, "node_id": root.pk, "start": 4, "end": 2,
                                                           "text": "x"}, format="json")
    assert outside.status_code == 400 and "not a span" in outside.json()["detail"]
    not_cut = client.post(url(reasoning_session, "continue-generating"), {"version": 0, "node_id": root.pk}, format="json")
    assert not_cut.status_code == 400 and "ran out of tokens" in not_cut.json()["detail"]
    assert Node.objects.count() == 1


def test_tool_calls_over_the_api_and_a_server_that_is_down(project, members, client, settings, time_server,
                                                           use_backend):
    backend = CharBackend(script="Evening.")
    use_backend(backend)
    session = session_answering(project, members, backend)
    root = session.current_node
    bad = client.post(url(session, "tool-calls"), {"version": 0, "node_id": root.pk, "decisions": [
        {"action": "edit", "arguments": "{not json"}]}, format="json")
    assert bad.status_code == 400 and "decisions[0].arguments" in json.dumps(bad.json())
    settings.MCP_SERVERS = {"time": {"command": "/nonexistent/mcp-server"}}
    mcp.clear_cache()
    down = client.post(url(session, "tool-calls"), {"version": 0, "node_id": root.pk}, format="json")
    assert down.status_code == 503 and "Retry-After" in down and "time" in down.json()["detail"]
    assert Node.objects.count() == 1
    settings.MCP_SERVERS = {"time": {"command": agentic.TIME_SERVER}}
    mcp.clear_cache()
    ran = client.post(url(session, "tool-calls"), {"version": 0, "node_id": root.pk}, format="json")
    assert ran.status_code == 201, ran.content
    assert ran.json()["operator"] == "run_tool_calls" and ran.json()["tool_results"][0]["server"] == "time"


def test_the_stream_runs_auto_approved_calls_and_says_so(project, members, client, time_server, use_backend):
    backend = CharBackend(script=agentic.call_text({"timezone": "UTC"}))
    use_backend(backend)
    session = session_answering(project, members, backend, answer="Let me check. " + agentic.TOKYO)
    config = services.config_for(project)
    config.auto_approve_tools, config.max_tool_steps = True, 2
    config.save()
    ran = client.post(url(session, "tool-calls"), {"version": 0, "node_id": session.current_node.pk}, format="json")
    events = events_of(client.post(f"/api/v1/sessions/{session.pk}/nodes/{ran.json()['id']}/stream/"))
    names = [name for name, _ in events]
    assert names.count("turn") == 1 and names[-1] == "done"
    turn = next(payload for name, payload in events if name == "turn")
    assert turn["tool_results"][0]["name"] == "get_current_time"
    assert events[-1][1]["node"] == turn["node"]
    channels = {payload["channel"] for name, payload in events if name == "token"}
    assert {"tool_name", "tool_arguments"} <= channels
    assert Event.objects.filter(kind=EventKind.RUN_TOOL_CALLS).count() == 2


def test_only_an_admin_chooses_tool_servers_and_auto_approve(members, project, settings):
    settings.MCP_SERVERS = {"time": {"command": "/bin/true"}}
    curator = api_client_for(members["curator"])
    config_url = "/api/v1/projects/alpha/annotate/config/"
    refused = curator.put(config_url, {"tool_servers": ["time"]}, format="json")
    assert refused.status_code == 403 and "tool_servers" in refused.json()["detail"]
    assert curator.put(config_url, {"reasoning_budget": 64, "response_template": "qwen3"},
                       format="json").status_code == 200
    admin = api_client_for(members["admin"])
    unknown = admin.put(config_url, {"tool_servers": ["/bin/sh"]}, format="json")
    assert unknown.status_code == 400 and "not an allowed MCP server" in unknown.json()["tool_servers"][0]
    saved = admin.put(config_url, {"tool_servers": ["time"], "auto_approve_tools": True}, format="json")
    assert saved.status_code == 200 and saved.json()["tool_servers"] == ["time"]
    config = services.config_for(project)
    config.refresh_from_db()
    assert (config.tool_servers, config.auto_approve_tools, config.reasoning_budget) == (["time"], True, 64)
