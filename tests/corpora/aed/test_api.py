"""The AED API: every endpoint for every role, then curation, proposals and replays over HTTP."""

import io
import json

import pytest
from rest_framework.test import APIClient

from corpora.aed import services
from corpora.aed.models import Replay
from tests import real_traces as real

from ...calc_traces import make_demo_trace
from ...conftest import api_client_for

pytestmark = pytest.mark.django_db
ROLES = ["admin", "curator", "annotator", "trainer", "outsider", "anonymous"]
CURATE = {"admin": 200, "curator": 200, "annotator": 403, "trainer": 403, "outsider": 404, "anonymous": 401}
CASE = {"admin": 404, "curator": 200, "annotator": 404, "trainer": 404, "outsider": 404, "anonymous": 401}


@pytest.fixture
def curated(calc_trace, members):
    curator = members["curator"]
    case = services.open_case(trace=calc_trace, curator=curator)
    case = services.update_case(case=case, version=case.version, actor=curator,
                                changes={"error_step": 1, "category": "plan-error", "diagnosis": "wrong operand"})
    proposal = services.add_proposal(case=case, actor=curator, corrected_action="calc 391 - 45")
    replay = services.start_replay(proposal=proposal, pairs=2, user=curator, publish=False)
    return {"trace": calc_trace, "case": case, "proposal": proposal, "replay": replay}


MATRIX = [
    ("get", "/api/v1/projects/alpha/aed/traces/", None, CURATE),
    ("get", "/api/v1/projects/alpha/aed/traces/{trace}/", None, CURATE),
    ("post", "/api/v1/projects/alpha/aed/traces/{trace}/case/", None, CURATE),
    ("get", "/api/v1/projects/alpha/aed/summary/", None, CURATE),
    # A case belongs to the curator who opened it, but every curator and admin of the project may read it.
    ("get", "/api/v1/aed/cases/{case}/", None, {**CASE, "admin": 200}),
    ("get", "/api/v1/aed/replays/{replay}/", None, {**CASE, "admin": 200}),
    ("post", "/api/v1/aed/cases/{case}/proposals/", {"corrected_action": "answer 346"},
     {**CASE, "admin": 201, "curator": 201}),
    ("post", "/api/v1/aed/proposals/{proposal}/status/", {"status": "accepted"}, {**CASE, "admin": 200}),
]


@pytest.mark.parametrize("who", ROLES)
@pytest.mark.parametrize("method, url, body, expected", MATRIX, ids=[f"{m} {u}" for m, u, _, _ in MATRIX])
def test_endpoint_status_for_role(members, curated, who, method, url, body, expected):
    client = APIClient() if who == "anonymous" else api_client_for(members[who])
    ids = {name: obj.pk for name, obj in curated.items()}
    response = getattr(client, method)(url.format(**ids), body, format="json")
    assert response.status_code == expected[who], response.content


def test_another_project_cannot_see_the_trace_or_case(curated, other_project, members):
    from dataplatform.accounts.models import Membership

    stranger = members["outsider"]
    Membership.objects.create(user=stranger, project=other_project, role="curator")
    client = api_client_for(stranger)
    assert client.get(f"/api/v1/projects/beta/aed/traces/{curated['trace'].pk}/").status_code == 404
    assert client.get(f"/api/v1/aed/cases/{curated['case'].pk}/").status_code == 404
    assert client.post(f"/api/v1/aed/proposals/{curated['proposal'].pk}/replays/", {"pairs": 1},
                       format="json").status_code == 404


def test_curation_over_the_api(calc_trace, members, django_capture_on_commit_callbacks):
    client = api_client_for(members["curator"])
    case = client.post(f"/api/v1/projects/alpha/aed/traces/{calc_trace.pk}/case/").json()
    url = f"/api/v1/aed/cases/{case['id']}/"
    edited = client.patch(url, {"version": case["version"], "changes": {
        "error_step": 1, "category": "plan-error", "diagnosis": "17 * 32 instead of 17 * 23",
        "evidence": [{"step": 1, "quote": "544"}], "evidence_check": "supported"}}, format="json")
    assert edited.status_code == 200, edited.content
    assert edited.json()["grade"] == "C"  # supported, not replayed
    assert client.patch(url, {"version": case["version"], "changes": {"diagnosis": "x"}},
                        format="json").status_code == 409
    bad = client.patch(url, {"version": edited.json()["version"], "changes": {"category": "cosmic-rays"}},
                       format="json")
    assert bad.status_code == 400 and "Unknown error category" in bad.json()["detail"]
    proposal = client.post(f"{url}proposals/", {"corrected_action": "calc 17 * 23"}, format="json").json()
    with django_capture_on_commit_callbacks(execute=False):
        replay = client.post(f"/api/v1/aed/proposals/{proposal['id']}/replays/",
                             {"pairs": 4, "seed": 7, "options": {"max_steps": 4}}, format="json")
    assert replay.status_code == 202 and replay.json()["pairs"] == 4 and replay.json()["job"]
    assert Replay.objects.get(pk=replay.json()["id"]).options == {"max_steps": 4}
    too_many = client.post(f"/api/v1/aed/proposals/{proposal['id']}/replays/", {"pairs": 10_000}, format="json")
    assert too_many.status_code == 400
    submitted = client.post(f"{url}submit/", {"version": edited.json()["version"]}, format="json")
    assert submitted.status_code == 200 and submitted.json()["status"] == "submitted"
    summary = client.get("/api/v1/projects/alpha/aed/summary/").json()
    assert summary["cases"] == 1 and summary["grades"]["C"] == 1 and summary["categories"] == {"plan-error": 1}
    assert [rule["grade"] for rule in summary["grade_rules"]] == ["A", "B", "C", "D"]


def test_import_over_the_api(members):
    client = api_client_for(members["curator"])
    good = json.dumps(make_demo_trace("2 + 3", ["calc 2 + 3", "answer 5"], trace_id="t1")).encode()
    upload = io.BytesIO(good + b"\n" + b'{"trace_id": "t2"}\n')
    upload.name = "traces.jsonl"
    response = client.post("/api/v1/projects/alpha/aed/import/", {"file": upload}, format="multipart")
    assert response.status_code == 400
    assert [(e["line"], e["file"]) for e in response.json()["errors"]] == [(2, "traces.jsonl")]
    upload = io.BytesIO(good)
    upload.name = "traces.jsonl"
    assert client.post("/api/v1/projects/alpha/aed/import/", {"file": upload},
                       format="multipart").json()["created"] == 1
    listed = client.get("/api/v1/projects/alpha/aed/traces/?environment=calc-v1").json()["results"]
    assert [t["trace_id"] for t in listed] == ["t1"]


def test_webhook_headers_are_never_returned(members, calc_trace, settings):
    """They usually carry the runner's credentials: the API shows their names only."""
    settings.AED_REPLAY_WEBHOOKS = ["https://runner.internal/run"]
    curator = members["curator"]
    case = services.open_case(trace=calc_trace, curator=curator)
    case = services.update_case(case=case, version=case.version, actor=curator,
                                changes={"error_step": 1, "category": "plan-error", "diagnosis": "wrong"})
    proposal = services.add_proposal(case=case, actor=curator, corrected_action="calc 391 - 45")
    replay = services.start_replay(proposal=proposal, pairs=1, runner="webhook", user=curator, publish=False,
                                   options={"url": "https://runner.internal/run",
                                            "headers": {"Authorization": "Bearer very-secret"}})
    assert Replay.objects.get(pk=replay.pk).options["headers"] == {"Authorization": "Bearer very-secret"}
    body = api_client_for(curator).get(f"/api/v1/aed/replays/{replay.pk}/")
    assert body.status_code == 200 and "very-secret" not in body.content.decode()
    assert body.json()["options"]["headers"] == {"Authorization": "(hidden)"}


@pytest.mark.parametrize("name", [real.OPENHANDS_2025, real.SWE_AGENT_1, real.SWE_AGENT_0])
def test_a_real_run_imports_over_the_api_message_by_message(members, name):
    """The 2025 OpenHands record and SWE-agent's own trajectories (tests/fixtures/real), uploaded as a curator
    would: the trace the API returns holds the run's messages, the error turns the agent read included."""
    client = api_client_for(members["curator"])
    upload = io.BytesIO(real.body(name))
    upload.name = name.split("/")[-1]
    response = client.post("/api/v1/projects/alpha/aed/import/", {"file": upload}, format="multipart")
    assert response.status_code == 200 and response.json()["created"] == 1, response.json()
    [listed] = client.get("/api/v1/projects/alpha/aed/traces/").json()["results"]
    trace = client.get(f"/api/v1/projects/alpha/aed/traces/{listed['id']}/").json()
    assert (trace["source_format"], trace["task_id"]) == real.IMPORTS[name]
    assert real.view(trace["steps"]) == real.expected(name)
