"""The labeler API: every endpoint for every role, then the review flow, import, metrics and filters."""

import io

import pytest
from rest_framework.test import APIClient

from labeler import services
from labeler.models import Label, LabelStatus, ReviewClaim
from tests import real_traces as real

from ..conftest import api_client_for
from ..doubles import RecordingProgress
from .conftest import STAGE_ONE, STAGE_TWO, answer

pytestmark = pytest.mark.django_db
ROLES = ["admin", "curator", "annotator", "trainer", "outsider", "anonymous"]


@pytest.fixture
def labeled(project, make_tasks, scripted):
    tasks = make_tasks(2)
    scripted({"stage1": [answer(STAGE_ONE)] * 2, "stage2": [answer(STAGE_TWO)] * 2})
    services.autolabel_project(project=project, progress=RecordingProgress())
    return tasks


def client_as(members, who):
    return APIClient() if who == "anonymous" else api_client_for(members[who])


OK_READ = {"admin": 200, "curator": 200, "annotator": 200, "trainer": 403, "outsider": 404, "anonymous": 401}
CURATE = {"admin": 200, "curator": 200, "annotator": 403, "trainer": 403, "outsider": 404, "anonymous": 401}
MATRIX = [
    ("get", "/api/v1/taxonomies/", None,
     {"admin": 200, "curator": 200, "annotator": 200, "trainer": 200, "outsider": 200, "anonymous": 401}),
    ("get", "/api/v1/projects/alpha/labeler/settings/", None, OK_READ),
    ("put", "/api/v1/projects/alpha/labeler/settings/", {"overlap": 2}, CURATE),
    ("get", "/api/v1/projects/alpha/labeler/tasks/", None, OK_READ),
    ("get", "/api/v1/projects/alpha/labeler/tasks/{task}/", None,
     {"admin": 200, "curator": 200, "annotator": 404, "trainer": 403, "outsider": 404, "anonymous": 401}),
    ("get", "/api/v1/projects/alpha/labeler/queue/", None, CURATE),
    ("get", "/api/v1/projects/alpha/labeler/metrics/", None, CURATE),
    ("post", "/api/v1/projects/alpha/labeler/autolabel/", {}, {**CURATE, "admin": 202, "curator": 202}),
    ("post", "/api/v1/projects/alpha/labeler/claim/", None, OK_READ),
    ("get", "/api/v1/labels/{model_label}/", None,
     {"admin": 200, "curator": 200, "annotator": 404, "trainer": 404, "outsider": 404, "anonymous": 401}),
]


@pytest.mark.parametrize("who", ROLES)
@pytest.mark.parametrize("method, url, body, expected", MATRIX, ids=[f"{m} {u}" for m, u, _, _ in MATRIX])
def test_endpoint_status_for_role(members, labeled, who, method, url, body, expected,
                                  django_capture_on_commit_callbacks):
    model_label = Label.objects.filter(origin="model").first()
    with django_capture_on_commit_callbacks(execute=False):
        response = getattr(client_as(members, who), method)(
            url.format(task=labeled[0].pk, model_label=model_label.pk), body, format="json")
    assert response.status_code == expected[who], response.content


def test_other_projects_tasks_and_labels_are_invisible(members, labeled, other_project, make_tasks):
    foreign = make_tasks(1, target=other_project)[0]
    client = api_client_for(members["curator"])
    assert client.get(f"/api/v1/projects/alpha/labeler/tasks/{foreign.pk}/").status_code == 404
    assert client.get("/api/v1/projects/beta/labeler/tasks/").status_code == 404
    ids = [row["id"] for row in client.get("/api/v1/projects/alpha/labeler/tasks/").json()["results"]]
    assert foreign.pk not in ids and set(ids) == {t.pk for t in labeled}


def test_review_flow_over_the_api(members, labeled):
    reviewer = api_client_for(members["annotator"])
    claimed = reviewer.post("/api/v1/projects/alpha/labeler/claim/").json()
    label = claimed["label"]
    assert label["values"]["domain_l1"] == "web_backend" and label["origin"] == "human"
    # The reviewer now sees the task they claimed (and only that one), with the model's label and their own.
    listed = reviewer.get("/api/v1/projects/alpha/labeler/tasks/").json()["results"]
    assert [row["id"] for row in listed] == [claimed["task"]]
    detail = reviewer.get(f"/api/v1/projects/alpha/labeler/tasks/{claimed['task']}/").json()
    assert sorted(lbl["origin"] for lbl in detail["labels"]) == ["human", "model"]

    url = f"/api/v1/labels/{label['id']}/"
    edited = reviewer.patch(url, {"version": label["version"], "values": {"scope": "multi-file"}}, format="json")
    assert edited.status_code == 200 and edited.json()["provenance"]["scope"] == "human"
    stale = reviewer.patch(url, {"version": label["version"], "values": {"scope": "single-file"}}, format="json")
    assert stale.status_code == 409
    bad = reviewer.patch(url, {"version": edited.json()["version"], "values": {"domain_l2": ["logic-error"]}},
                         format="json")
    assert bad.status_code == 400 and "not under domain_l1" in bad.json()["detail"]
    # Someone else cannot write it; the curator can read it.
    other = api_client_for(members["curator"])
    assert other.patch(url, {"version": 2, "values": {"scope": "single-line"}}, format="json").status_code == 404
    assert other.get(url).json()["values"]["scope"] == "multi-file"
    submitted = reviewer.post(f"{url}submit/", {"version": edited.json()["version"]}, format="json")
    assert submitted.status_code == 200 and submitted.json()["status"] == "submitted"
    assert submitted.json()["category"] == "A"
    assert ReviewClaim.objects.get(reviewer=members["annotator"]).state == "done"
    metrics = other.get("/api/v1/projects/alpha/labeler/metrics/").json()
    assert metrics["llm_vs_human"]["fields"]["scope"] == {"accuracy": 0.0, "n": 1}
    assert metrics["llm_vs_human"]["fields"]["domain_l1"] == {"accuracy": 1.0, "n": 1}
    reviewed = other.get("/api/v1/projects/alpha/labeler/tasks/?state=reviewed").json()["results"]
    assert [row["id"] for row in reviewed] == [claimed["task"]]


def test_task_filters(members, labeled):
    client = api_client_for(members["curator"])
    get = lambda query: [r["id"] for r in client.get(f"/api/v1/projects/alpha/labeler/tasks/?{query}").json()["results"]]  # noqa: E731
    assert len(get("state=auto")) == 2 and get("state=unlabeled") == [] and get("state=error") == []
    assert len(get("field=domain_l2&value=rest-api")) == 2 and get("field=domain_l2&value=orm-queries") == []
    assert len(get("field=code_language&value=python")) == 2 and get("field=code_language&value=go") == []
    assert get("search=repo-1") == [labeled[1].pk]
    assert client.get("/api/v1/projects/alpha/labeler/tasks/?field=colour&value=red").status_code == 400
    assert client.get("/api/v1/projects/alpha/labeler/tasks/?state=nope").status_code == 400


def test_import_dry_run_and_errors(members):
    client = api_client_for(members["curator"])
    good = b'{"instance_id": "a__b-1", "problem_statement": "It breaks", "FAIL_TO_PASS": "[\\"t1\\"]"}\n'
    upload = io.BytesIO(good + b'{"instance_id": "a__b-2"}\n')
    upload.name = "tasks.jsonl"
    response = client.post("/api/v1/projects/alpha/labeler/import/", {"file": upload, "kind": "tasks"},
                           format="multipart")
    assert response.status_code == 400
    assert response.json()["errors"] == [{"file": "tasks.jsonl", "line": 2, "field": "problem_statement",
                                          "message": response.json()["errors"][0]["message"]}]
    upload = io.BytesIO(good)
    upload.name = "tasks.jsonl"
    ok = client.post("/api/v1/projects/alpha/labeler/import/", {"file": upload, "kind": "tasks"}, format="multipart")
    assert ok.status_code == 200 and ok.json()["created"] == 1
    assert client.post("/api/v1/projects/alpha/labeler/import/", {"kind": "x"}, format="multipart").status_code == 400


def test_taxonomy_upload_reports_file_line_field(members, project):
    client = api_client_for(members["curator"])
    services.settings_for(project)  # a project starts on the shipped taxonomy, swe_v2
    upload = io.BytesIO(b"schema: swe-taxonomy/1\nname: broken\nversion: '1'\naxes: {}\n")
    upload.name = "broken.yaml"
    response = client.post("/api/v1/projects/alpha/labeler/taxonomy/", {"file": upload}, format="multipart")
    assert response.status_code == 400
    assert {"file": "broken.yaml", "line": 1, "field": "axes",
            "message": "must map each axis name to its families"} in response.json()["errors"]
    listed = client.get("/api/v1/taxonomies/").json()
    assert [(t["name"], t["version"]) for t in listed] == [("swe", "2")]
    detail = client.get(f"/api/v1/taxonomies/{listed[0]['id']}/").json()
    assert detail["counts"] == {"families": 47, "tags": 227} and len(detail["spec"]["axes"]["domain"]["families"]) == 21


def test_model_errors_are_inspectable(members, project, make_tasks, scripted):
    make_tasks(1)
    scripted({"stage1": ["I think it is a bug", "Still no JSON"], "stage2": []})
    services.autolabel_project(project=project, progress=RecordingProgress())
    client = api_client_for(members["curator"])
    errored = client.get("/api/v1/projects/alpha/labeler/tasks/?state=error").json()["results"]
    detail = client.get(f"/api/v1/projects/alpha/labeler/tasks/{errored[0]['id']}/").json()
    model = detail["labels"][0]
    assert model["status"] == LabelStatus.ERROR and model["error"].startswith("stage 1: no JSON object")


@pytest.mark.parametrize("name", [real.OPENHANDS_2025, real.SWE_AGENT_1, real.SWE_AGENT_0])
def test_a_real_run_imports_as_a_trajectory_over_the_api_message_by_message(members, name):
    """The 2025 OpenHands record and SWE-agent's own trajectories (tests/fixtures/real) through the import API:
    the trajectory the API returns holds the run's messages, the error turns the agent read included."""
    client = api_client_for(members["curator"])
    upload = io.BytesIO(real.body(name))
    upload.name = name.split("/")[-1]
    response = client.post("/api/v1/projects/alpha/labeler/import/", {"file": upload, "kind": "trajectories"},
                           format="multipart")
    assert response.status_code == 200 and response.json()["created"] == 1, response.json()
    [listed] = client.get("/api/v1/projects/alpha/labeler/trajectories/").json()["results"]
    trajectory = client.get(f"/api/v1/projects/alpha/labeler/trajectories/{listed['id']}/").json()
    assert (trajectory["source_format"], trajectory["instance_id"]) == real.IMPORTS[name]
    assert real.view(trajectory["messages"]) == real.expected(name)
