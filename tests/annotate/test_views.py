import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotate import services
from annotate.models import Item, Review
from tests.factories import MembershipFactory, UserFactory

from ..doubles import CharBackend

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("who, status, curator_parts", [
    ("admin", 200, True), ("curator", 200, True), ("annotator", 200, False), ("trainer", 403, False),
    ("outsider", 404, False),
])
def test_queue_page_by_role(client, members, project, who, status, curator_parts):
    client.force_login(members[who])
    response = client.get(reverse("annotate-queue", args=["alpha"]))
    assert response.status_code == status
    assert ("Import prompts" in response.content.decode()) == curator_parts


def test_claim_opens_the_workspace(client, members, project, make_items):
    make_items(1)
    client.force_login(members["annotator"])
    response = client.post(reverse("annotate-claim", args=["alpha"]))
    assert response.status_code == 302 and "/annotate/sessions/" in response["Location"]
    page = client.get(response["Location"]).content.decode()
    assert 'data-can-write="1"' in page and 'class="tok origin-model' in page


def test_claim_with_an_empty_queue_says_so(client, members, project):
    client.force_login(members["annotator"])
    response = client.post(reverse("annotate-claim", args=["alpha"]), follow=True)
    assert "No items left for you" in response.content.decode()


def test_workspace_is_read_only_for_a_curator_and_hidden_from_other_annotators(client, members, project, session):
    client.force_login(members["curator"])
    page = client.get(reverse("annotate-workspace", args=[session.pk])).content.decode()
    assert 'data-can-write="0"' in page
    other = UserFactory(username="other")
    MembershipFactory(project=project, user=other, role="annotator")
    client.force_login(other)
    assert client.get(reverse("annotate-workspace", args=[session.pk])).status_code == 404


def test_import_form_reports_line_errors(client, members, project):
    client.force_login(members["curator"])
    good = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    upload = SimpleUploadedFile("p.jsonl", f"{good}\n{{bad\n".encode())
    page = client.post(reverse("annotate-import", args=["alpha"]), {"file": upload}).content.decode()
    assert '<td translate="no">p.jsonl</td><td>2</td><td>(line)</td><td>invalid JSON' in page and "Nothing was written" in page
    assert not Item.objects.exists()


def test_import_form_imports_and_tables_up_to_200_errors(client, members, project):
    """The shared import report of every JSONL page: counts, skipped lines, and 200 errors listed."""
    client.force_login(members["curator"])
    good = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    upload = SimpleUploadedFile("p.jsonl", (good + "\n" + "{bad\n" * 250).encode())
    page = client.post(reverse("annotate-import", args=["alpha"]),
                       {"file": upload, "skip_bad_lines": "1"}).content.decode()
    assert "1 created" in page and "250 lines skipped" in page and Item.objects.count() == 1
    assert page.count("<td>(line)</td>") == 200 and "… and 50 more errors." in page
    response = client.post(reverse("annotate-import", args=["alpha"]), follow=True)
    assert "Choose a JSONL file to import." in response.content.decode()


def test_review_page_and_decisions(client, members, project, session):
    services.finish(session=session, version=0, actor=members["annotator"], accept=True)
    client.force_login(members["curator"])
    page = client.get(reverse("annotate-review", args=["alpha"])).content.decode()
    assert "accepted as generated" in page
    response = client.post(reverse("annotate-review-session", args=[session.pk]), {"decision": "rejected"},
                           follow=True)
    assert "needs a comment" in response.content.decode() and not Review.objects.exists()
    client.post(reverse("annotate-review-session", args=[session.pk]),
                {"decision": "rejected", "comment": "<b>too long</b>"})
    page = client.get(reverse("annotate-review", args=["alpha"])).content.decode()
    assert 'Rejected: <span translate="no">&lt;b&gt;too long&lt;/b&gt;</span>' in page
    client.force_login(members["annotator"])
    assert client.get(reverse("annotate-review", args=["alpha"])).status_code == 403


def test_metrics_page_draws_svg_charts(client, members, project, session):
    services.finish(session=session, version=0, actor=members["annotator"], accept=True)
    client.force_login(members["curator"])
    response = client.get(reverse("annotate-metrics", args=["alpha"]))
    html = response.content.decode()
    assert response.status_code == 200 and html.count("<svg") == 8
    assert "Corrections by channel" in html and "Corrections by round" in html
    assert "100%" in html  # the one response was accepted as generated
    client.force_login(members["annotator"])
    assert client.get(reverse("annotate-metrics", args=["alpha"])).status_code == 403


def test_review_and_metrics_api(members, project, session):
    from tests.conftest import api_client_for

    services.finish(session=session, version=0, actor=members["annotator"], accept=True)
    curator = api_client_for(members["curator"])
    created = curator.post(f"/api/v1/sessions/{session.pk}/review/", {"decision": "approved"}, format="json")
    assert created.status_code == 201 and created.json()["decision"] == "approved"
    assert api_client_for(members["annotator"]).post(f"/api/v1/sessions/{session.pk}/review/",
                                                     {"decision": "approved"}, format="json").status_code == 403
    metrics = curator.get("/api/v1/projects/alpha/annotate/metrics/").json()
    assert metrics["accepted_sessions"] == 1 and metrics["direct_accept_rate"] == 1.0
    assert api_client_for(members["trainer"]).get("/api/v1/projects/alpha/annotate/metrics/").status_code == 403


def test_curator_saves_settings_and_bad_values_are_named(client, members, project):
    client.force_login(members["curator"])
    client.post(reverse("annotate-config", args=["alpha"]), {"top_k": "7", "overlap": "2", "seed_policy": "fixed"})
    config = services.config_for(project)
    assert (config.top_k, config.overlap, config.seed_policy) == (7, 2, "fixed")
    page = client.post(reverse("annotate-config", args=["alpha"]), {"top_k": "99"}, follow=True).content.decode()
    assert "top_k: Ensure this value is less than or equal to 50." in page
    client.force_login(members["annotator"])
    assert client.post(reverse("annotate-config", args=["alpha"]), {"top_k": "3"}).status_code == 403


def test_panda_json_upload_by_form_and_api(client, members, project, use_backend):
    from annotate.models import Session
    from tests.annotate.panda_files import minimal_file
    from tests.conftest import api_client_for

    backend = CharBackend()
    use_backend(backend)
    document = json.dumps(minimal_file()).encode()
    client.force_login(members["curator"])
    page = client.post(reverse("annotate-import-panda", args=["alpha"]),
                       {"file": SimpleUploadedFile("s.panda.json", document)}, follow=True).content.decode()
    assert "s.panda.json imported" in page
    session = Session.objects.get()
    assert session.annotator == members["curator"] and session.status == "accepted"
    again = api_client_for(members["curator"]).post("/api/v1/projects/alpha/annotate/import-panda/",
                                                    {"file": SimpleUploadedFile("s.panda.json", document)},
                                                    format="multipart")
    assert again.status_code == 200 and again.json()["duplicate"] is True
    broken = api_client_for(members["curator"]).post("/api/v1/projects/alpha/annotate/import-panda/",
                                                     {"file": SimpleUploadedFile("x.panda.json", b"{nope")},
                                                     format="multipart")
    assert broken.status_code == 400 and "x.panda.json, line 1 column 2: not a JSON file" in str(broken.json())
    assert api_client_for(members["annotator"]).post(
        "/api/v1/projects/alpha/annotate/import-panda/", {"file": SimpleUploadedFile("s.panda.json", document)},
        format="multipart").status_code == 403


def test_a_live_panda_upload_opens_the_workspace_to_keep_correcting(client, members, project, use_backend):
    from annotate.models import Session
    from tests.annotate.panda_files import minimal_file

    use_backend(CharBackend())
    client.force_login(members["curator"])
    queue = client.get(reverse("annotate-queue", args=["alpha"])).content.decode()
    assert 'name="live"' in queue
    response = client.post(reverse("annotate-import-panda", args=["alpha"]),
                           {"file": SimpleUploadedFile("s.panda.json", json.dumps(minimal_file()).encode()),
                            "live": "1"})
    session = Session.objects.get()
    assert session.status == "open" and session.claim.state == "active"
    assert response.status_code == 302 and response.url == reverse("annotate-workspace", args=[session.pk])
    workspace = client.get(response.url).content.decode()
    assert 'data-can-write="1"' in workspace  # the curator may write: it is their open session


def test_several_panda_files_are_reported_each(client, members, project, use_backend):
    from annotate.models import Session
    from tests.annotate.panda_files import minimal_file

    use_backend(CharBackend())
    client.force_login(members["curator"])
    good, other = minimal_file(), minimal_file()
    for dialog in other["dialogs"].values():
        dialog["messages"][0]["content"] = "Another prompt"
    broken = minimal_file()
    broken["dialogs"]["1"]["messages"][0]["role"] = "robot"
    files = [SimpleUploadedFile(name, json.dumps(document).encode())
             for name, document in (("a.panda.json", good), ("b.panda.json", broken), ("c.panda.json", other))]
    page = client.post(reverse("annotate-import-panda", args=["alpha"]), {"file": files}, follow=True).content.decode()
    assert "a.panda.json imported: 2 dialogs in 1 tree (continue_with_chosen 1, generate_new 1)" in page
    assert "c.panda.json imported: 2 dialogs" in page
    assert "b.panda.json, dialogs.1.messages[0].role: must be one of system, user, assistant, tool" in page
    assert Session.objects.count() == 2  # the broken file wrote nothing; the others are whole


def test_curator_reassigns_from_the_queue_page(client, members, project, make_items):
    from annotate.models import Claim

    make_items(1)
    claim = services.claim_next(project=project, annotator=members["annotator"])
    client.force_login(members["curator"])
    page = client.get(reverse("annotate-queue", args=["alpha"])).content.decode()
    assert f'action="/projects/alpha/annotate/claims/{claim.pk}/reassign"' in page
    client.post(reverse("annotate-reassign", args=["alpha", claim.pk]), {"username": "admin"})
    assert Claim.objects.get(item=claim.item, annotator=members["admin"]).state == "active"
    response = client.post(reverse("annotate-reassign", args=["alpha", claim.pk]), {"username": "trainer"},
                           follow=True)
    assert "Choose an annotator of this project." in response.content.decode()
    client.force_login(members["annotator"])
    assert client.post(reverse("annotate-reassign", args=["alpha", claim.pk]), {"username": "admin"}).status_code == 403


def test_workspace_offers_skip(client, members, session):
    client.force_login(members["annotator"])
    page = client.get(reverse("annotate-workspace", args=[session.pk])).content.decode()
    assert f'data-url-skip="/api/v1/projects/alpha/annotate/claims/{session.claim_id}/skip/"' in page


def test_oversized_panda_upload_is_refused_by_name(client, members, project, monkeypatch):
    from annotate.panda_json import parser

    monkeypatch.setattr(parser, "MAX_FILE_BYTES", 10)
    client.force_login(members["curator"])
    page = client.post(reverse("annotate-import-panda", args=["alpha"]),
                       {"file": SimpleUploadedFile("big.panda.json", b"{" + b" " * 20 + b"}")},
                       follow=True).content.decode()
    assert "big.panda.json: 22 bytes is more than the 10 allowed." in page


# --- the workspace on an agent rollout, and the agentic settings ----------------------------------------

HOSTILE = "<img src=x onerror=alert(1)><script>alert(2)</script>"
# Made-up ids (the page shows whatever bytes they have): <think> + reasoning + </think>, then one call.
AGENT_CHANNELS = ["marker", "reasoning", "reasoning", "marker", "tool_name", "marker", "tool_arguments", "marker"]


def agent_session(project, members):
    from annotate.models import Item

    from .conftest import fake_rollout

    ids = list(range(300, 300 + len(AGENT_CHANNELS)))
    call = {"id": "call_0", "type": "function", "function": {"name": "get_current_time",
                                                             "arguments": json.dumps({"timezone": HOSTILE})}}
    rollout = fake_rollout(ids) | {"channels": AGENT_CHANNELS, "message": {
        "role": "assistant", "content": "", "reasoning": "r", "tool_calls": [call], "finish_reason": "tool_calls"}}
    messages = [{"role": "user", "content": "Time in Tokyo?"},
                {"role": "assistant", "content": "", "reasoning": HOSTILE, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_0", "name": "get_current_time", "content": HOSTILE},
                {"role": "user", "content": "And now?"}]
    tools = [{"type": "function", "function": {"name": "get_current_time", "description": "The time now.",
                                               "parameters": {"type": "object"}}}]
    Item.objects.create(project=project, messages=messages, tools=tools, source_sha256="a" * 64, prompt_ids=[1, 2],
                        rollout=rollout)
    return services.claim_with_session(project=project, annotator=members["annotator"]).session


def test_workspace_shows_channels_context_tool_panel_and_tree(client, members, project):
    session = agent_session(project, members)
    client.force_login(members["annotator"])
    page = client.get(reverse("annotate-workspace", args=[session.pk])).content.decode()
    # The response by channel, in token order: the reasoning block, then the call's block (markers inside).
    reasoning, call = page.index('class="block block-reasoning"'), page.index('class="block block-call"')
    assert 0 < reasoning < call and 'class="block block-content"' not in page
    assert page.count("model ch-reasoning") == 2 and page.count("model ch-tool_name") == 1 and page.count("model ch-marker") == 4
    assert 'data-ids="301" data-bytes="' in page and 'data-p="0.904837"' in page  # exp(-0.1)
    # The context: earlier rounds, the call and its result, all escaped; the tools offered.
    assert page.count('class="ctx ctx-') == 4 and "2 tools offered" not in page and "1 tool offered" in page
    assert HOSTILE not in page and page.count("&lt;img src=x onerror=alert(1)&gt;") >= 4
    # The tool panel, its arguments pretty-printed (and escaped inside the textarea), and Run.
    assert 'id="tool-panel"' in page and 'id="tool-args-0"' in page and 'id="btn-run-tools"' in page
    assert '{\n  &quot;timezone&quot;: &quot;&lt;img' in page
    assert 'id="btn-new-round" disabled' in page and 'id="btn-continue" class="secondary" disabled' in page
    # The tree panel: one tree, its root current.
    assert 'id="tree-panel"' in page and "Tree 1" in page and 'class="tree-node depth-0 current"' in page
    for url in ("tool-calls", "new-round", "generate-new", "edit-prompt", "edit-selection", "select",
                "continue-generating"):
        assert f'/api/v1/sessions/{session.pk}/{url}/"' in page

    client.force_login(members["curator"])  # read-only: no panel, the tree without buttons
    page = client.get(reverse("annotate-workspace", args=[session.pk])).content.decode()
    assert 'id="tool-panel"' not in page and 'class="tree-select"' not in page and 'id="tree-panel"' in page


def test_settings_form_saves_the_agentic_settings(client, members, project, settings):
    settings.MCP_SERVERS = {"time": {"command": "/usr/bin/true"}, "git": {"url": "http://127.0.0.1:9/mcp"}}
    url = reverse("annotate-config", args=["alpha"])
    client.force_login(members["admin"])
    page = client.get(reverse("annotate-queue", args=["alpha"])).content.decode()
    assert 'name="tool_servers" value="git"' in page and 'name="tool_servers" value="time"' in page
    assert 'name="auto_approve_tools" value="false"' in page and '<option value="chatml-think" translate="no">' in page
    # As the form sends them: the hidden empty value and "false" before the checked boxes.
    client.post(url, {"response_template": "qwen3", "reasoning_budget": "12", "max_tool_steps": "3",
                      "tool_servers": ["", "time"], "auto_approve_tools": ["false", "true"]})
    config = services.config_for(project.__class__.objects.get(pk=project.pk))
    assert (config.response_template, config.reasoning_budget, config.max_tool_steps) == ("qwen3", 12, 3)
    assert config.tool_servers == ["time"] and config.auto_approve_tools is True
    client.post(url, {"tool_servers": [""], "auto_approve_tools": ["false"]})  # every box unchecked
    config.refresh_from_db()
    assert config.tool_servers == [] and config.auto_approve_tools is False and config.reasoning_budget == 12
    page = client.post(url, {"tool_servers": ["", "nope"]}, follow=True).content.decode()
    assert "&#x27;nope&#x27; is not an allowed MCP server" in page

    client.force_login(members["curator"])  # curators: the generation settings, not what runs tools
    page = client.get(reverse("annotate-queue", args=["alpha"])).content.decode()
    assert 'id="id_reasoning_budget"' in page and 'name="tool_servers"' not in page
    assert 'name="auto_approve_tools"' not in page
    client.post(url, {"reasoning_budget": "5", "max_tool_steps": "2", "response_template": ""})
    config.refresh_from_db()
    assert (config.reasoning_budget, config.max_tool_steps, config.response_template) == (5, 2, "")


def test_a_curator_posting_tool_servers_or_auto_approve_gets_403(client, members, project, settings):
    settings.MCP_SERVERS = {"time": {"command": "/usr/bin/true"}}
    client.force_login(members["curator"])
    url = reverse("annotate-config", args=["alpha"])
    assert client.post(url, {"tool_servers": ["", "time"]}).status_code == 403
    assert client.post(url, {"auto_approve_tools": ["false", "true"]}).status_code == 403
    config = services.config_for(project)
    config.refresh_from_db()
    assert config.tool_servers == [] and config.auto_approve_tools is False


def test_review_page_costs_the_same_queries_for_one_row_or_many(client, members, project, make_items,
                                                                django_assert_max_num_queries):
    """The page shows each row's first error position: read for the whole page at once, not a query a row."""
    make_items(6)
    annotator = members["annotator"]

    def accept_next():
        session = services.open_session(claim=services.claim_next(project=project, annotator=annotator))
        services.finish(session=session, version=0, actor=annotator, accept=True)

    client.force_login(members["curator"])
    url = reverse("annotate-review", args=["alpha"])
    accept_next()
    with CaptureQueriesContext(connection) as one_row:
        assert client.get(url).status_code == 200
    for _ in range(5):
        accept_next()
    with django_assert_max_num_queries(len(one_row.captured_queries)):
        assert client.get(url).content.decode().count("accepted as generated") == 6
