"""The ATD API: every endpoint for every role, cross-project access, near-tie counts at the epsilon
boundary, freezing then asking the teacher, and imports."""

import io
import json

import pytest
from rest_framework.test import APIClient

from corpora.atd.models import AtdPrompt, Score, ScoringRun, Selection, TeacherAnswer, TeacherRun
from dataplatform.accounts.models import Membership

from ...conftest import api_client_for

pytestmark = pytest.mark.django_db
ROLES = ["admin", "curator", "annotator", "trainer", "outsider", "anonymous"]
DENIED = {"annotator": 403, "trainer": 403, "outsider": 404, "anonymous": 401}


def ok(code: int) -> dict:
    return {"admin": code, "curator": code, **DENIED}


def make_prompt(project, n: int, **fields) -> AtdPrompt:
    return AtdPrompt.objects.create(project=project, external_id=f"p{n}", source_sha256="0" * 64,
                                    messages=[{"role": "user", "content": f"question {n}"}],
                                    candidate_a=fields.pop("candidate_a", f"A{n}"),
                                    candidate_b=fields.pop("candidate_b", f"B{n}"), **fields)


def make_run(project, qs) -> ScoringRun:
    run = ScoringRun.objects.create(project=project, template_version="judge-v1")
    for n, q in enumerate(qs):
        prompt = AtdPrompt.objects.filter(project=project, external_id=f"p{n}").first() or make_prompt(project, n)
        Score.objects.create(run=run, prompt=prompt, q=q, q_ab=q)
    return run


@pytest.fixture
def atd(project, members):
    run = make_run(project, [0.5, 0.51, 0.52, 0.5200001, 0.1, 0.9, 1.0])
    selection = Selection.objects.create(project=project, run=run, name="ties", version=1, epsilon=0.02, size=0)
    teacher = TeacherRun.objects.create(selection=selection)
    return {"run": run.pk, "selection": selection.pk, "teacher": teacher.pk}


def jsonl(*records) -> io.BytesIO:
    upload = io.BytesIO("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records).encode())
    upload.name = "pool.jsonl"
    return upload


MATRIX = [
    ("get", "/api/v1/projects/alpha/atd/prompts/", None, ok(200)),
    ("get", "/api/v1/projects/alpha/atd/runs/", None, ok(200)),
    ("post", "/api/v1/projects/alpha/atd/runs/", {"method": "judge", "debias": True, "batch_size": 8}, ok(202)),
    ("get", "/api/v1/projects/alpha/atd/runs/{run}/", None, ok(200)),
    ("get", "/api/v1/projects/alpha/atd/runs/{run}/tie-counts/?epsilon=0.02", None, ok(200)),
    ("get", "/api/v1/projects/alpha/atd/selections/", None, ok(200)),
    ("post", "/api/v1/projects/alpha/atd/selections/", {"run": "{run}", "name": "ties", "epsilon": 0.02}, ok(201)),
    ("post", "/api/v1/projects/alpha/atd/selections/{selection}/teacher/", {"budget": 5}, ok(202)),
    ("get", "/api/v1/projects/alpha/atd/teacher-runs/{teacher}/", None, ok(200)),
]


@pytest.mark.parametrize("who", ROLES)
@pytest.mark.parametrize("method, url, body, expected", MATRIX, ids=[f"{m} {u}" for m, u, _, _ in MATRIX])
def test_endpoint_status_for_role(members, atd, who, method, url, body, expected,
                                  django_capture_on_commit_callbacks):
    client = APIClient() if who == "anonymous" else api_client_for(members[who])
    if body:
        body = {k: (int(v.format(**atd)) if isinstance(v, str) and "{" in v else v) for k, v in body.items()}
    with django_capture_on_commit_callbacks(execute=False):
        response = getattr(client, method)(url.format(**atd), body, format="json")
    assert response.status_code == expected[who], response.content


@pytest.mark.parametrize("who", ROLES)
def test_import_status_for_role(members, who):
    client = APIClient() if who == "anonymous" else api_client_for(members[who])
    response = client.post("/api/v1/projects/alpha/atd/import/",
                           {"file": jsonl({"id": "x", "prompt": "hi", "candidates": ["a", "b"]})}, format="multipart")
    assert response.status_code == ok(200)[who], response.content


def test_another_project_sees_nothing(atd, other_project, members, django_capture_on_commit_callbacks):
    stranger = members["outsider"]
    Membership.objects.create(user=stranger, project=other_project, role="curator")
    client = api_client_for(stranger)
    assert client.get(f"/api/v1/projects/beta/atd/runs/{atd['run']}/").status_code == 404
    assert client.get(f"/api/v1/projects/beta/atd/runs/{atd['run']}/tie-counts/").status_code == 404
    assert client.get(f"/api/v1/projects/beta/atd/teacher-runs/{atd['teacher']}/").status_code == 404
    with django_capture_on_commit_callbacks(execute=False):
        assert client.post(f"/api/v1/projects/beta/atd/selections/{atd['selection']}/teacher/", {},
                           format="json").status_code == 404
    refused = client.post("/api/v1/projects/beta/atd/selections/", {"run": atd["run"], "name": "x", "epsilon": 0.1},
                          format="json")
    assert refused.status_code == 400 and "run" in refused.json()
    assert client.get("/api/v1/projects/beta/atd/selections/").json()["results"] == []
    assert client.get("/api/v1/projects/beta/atd/runs/").json()["results"] == []
    assert client.get("/api/v1/projects/beta/atd/prompts/").json()["results"] == []
    assert not Selection.objects.filter(project=other_project).exists()


def test_tie_counts_at_the_epsilon_boundary(project, members):
    run = make_run(project, [0.52, 0.5200001, 0.48, 0.4799999, 0.5, 1.0, 0.0])
    client = api_client_for(members["curator"])
    body = client.get(f"/api/v1/projects/alpha/atd/runs/{run.pk}/tie-counts/?epsilon=0.02&epsilon=0.05&epsilon=0")
    assert body.status_code == 200, body.content
    data = body.json()
    assert data["scored"] == 7
    assert [(k["epsilon"], k["kept"]) for k in data["kept"]] == [(0.02, 3), (0.05, 5), (0.0, 1)]
    assert data["kept"][0]["fraction"] == pytest.approx(3 / 7)
    hist = data["histogram"]
    assert len(hist) == 20 and sum(b["count"] for b in hist) == 7
    assert hist[0] == {"lo": 0.0, "hi": 0.05, "count": 1}
    assert hist[19]["count"] == 1  # q = 1.0 falls in the last bin
    assert hist[9]["count"] == 2 and hist[10]["count"] == 3  # 0.48, 0.4799999 | 0.5, 0.52, 0.5200001


def test_tie_counts_refuse_a_bad_epsilon(atd, members):
    client = api_client_for(members["curator"])
    for bad in ("abc", "-0.1", "0.6", "nan"):
        response = client.get(f"/api/v1/projects/alpha/atd/runs/{atd['run']}/tie-counts/?epsilon={bad}")
        assert response.status_code == 400, bad


def test_run_detail_counts_scores(atd, members):
    data = api_client_for(members["admin"]).get(f"/api/v1/projects/alpha/atd/runs/{atd['run']}/").json()
    assert data["scored"] == 7 and data["pool"] == 7 and data["template_version"] == "judge-v1"


def test_start_scoring_returns_run_and_job(project, members, django_capture_on_commit_callbacks):
    client = api_client_for(members["curator"])
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post("/api/v1/projects/alpha/atd/runs/",
                               {"method": "likelihood", "debias": False, "batch_size": 4}, format="json")
    assert response.status_code == 202, response.content
    data = response.json()
    assert data["method"] == "likelihood" and data["batch_size"] == 4 and data["debias"] is False
    assert data["job"]["kind"] == "atd.score" and data["job"]["params"] == {"run": data["id"]}
    assert client.post("/api/v1/projects/alpha/atd/runs/", {"method": "vibes"}, format="json").status_code == 400
    listed = client.get("/api/v1/projects/alpha/atd/runs/").json()["results"]
    assert [r["id"] for r in listed] == [data["id"]]


def test_freeze_then_ask_the_teacher(project, members, django_capture_on_commit_callbacks, settings):
    settings.ATD_TEACHER_ENDPOINTS = ["http://vllm:8000"]
    run = make_run(project, [0.52, 0.5200001, 0.49, 0.9])
    client = api_client_for(members["curator"])
    frozen = client.post("/api/v1/projects/alpha/atd/selections/", {"run": run.pk, "name": "ties", "epsilon": 0.02},
                         format="json")
    assert frozen.status_code == 201, frozen.content
    assert frozen.json()["size"] == 2 and frozen.json()["version"] == 1
    again = client.post("/api/v1/projects/alpha/atd/selections/", {"run": run.pk, "name": "ties", "epsilon": 0.1},
                        format="json").json()
    assert again["version"] == 2 and again["size"] == 3
    with django_capture_on_commit_callbacks(execute=False):
        started = client.post(f"/api/v1/projects/alpha/atd/selections/{frozen.json()['id']}/teacher/",
                              {"model_name": "teacher-x", "base_url": "http://vllm:8000", "debias": True, "budget": 10},
                              format="json")
    assert started.status_code == 202, started.content
    teacher = started.json()
    assert teacher["job"]["kind"] == "atd.teacher" and teacher["budget"] == 10 and teacher["model_name"] == "teacher-x"
    prompt = AtdPrompt.objects.get(project=project, external_id="p0")
    TeacherAnswer.objects.create(run_id=teacher["id"], prompt=prompt, bit="A", status="ok")
    detail = client.get(f"/api/v1/projects/alpha/atd/teacher-runs/{teacher['id']}/").json()
    assert detail["counts"] == {"ok": 1, "tie": 0, "invalid": 0, "answered": 1}
    bad = client.post(f"/api/v1/projects/alpha/atd/selections/{frozen.json()['id']}/teacher/",
                      {"base_url": "ftp://x"}, format="json")
    assert bad.status_code == 400
    # Not on the admin's list: the worker would otherwise call any address a curator types.
    internal = client.post(f"/api/v1/projects/alpha/atd/selections/{frozen.json()['id']}/teacher/",
                           {"base_url": "http://169.254.169.254/latest"}, format="json")
    assert internal.status_code == 400 and "not allowed here" in internal.json()["base_url"][0]
    assert client.post("/api/v1/projects/alpha/atd/selections/", {"run": run.pk, "name": "Not a slug!",
                                                                   "epsilon": 0.02}, format="json").status_code == 400
    assert client.post("/api/v1/projects/alpha/atd/selections/", {"run": run.pk, "name": "x", "epsilon": 0.7},
                       format="json").status_code == 400


def test_import_and_errors(project, members):
    client = api_client_for(members["curator"])
    url = "/api/v1/projects/alpha/atd/import/"
    good = {"id": "p1", "prompt": "Which is better?", "candidates": ["yes", "no"]}
    bad = {"id": "", "prompt": "x"}
    failed = client.post(url, {"file": jsonl(good, bad)}, format="multipart")
    assert failed.status_code == 400
    errors = failed.json()["errors"]
    assert errors and errors[0]["line"] == 2 and errors[0]["field"] == "id"
    assert not AtdPrompt.objects.filter(project=project).exists()
    dry = client.post(url, {"file": jsonl(good), "dry_run": "1"}, format="multipart")
    assert dry.status_code == 200 and not AtdPrompt.objects.exists()
    skipped = client.post(url, {"file": jsonl(good, bad), "skip_bad_lines": "true"}, format="multipart")
    assert skipped.status_code == 200 and skipped.json()["created"] == 1
    assert client.post(url, {}, format="multipart").status_code == 400
    prompts = client.get("/api/v1/projects/alpha/atd/prompts/").json()
    assert [p["external_id"] for p in prompts["results"]] == ["p1"]
    assert prompts["results"][0]["candidate_a"] == "yes"


def test_prompt_list_is_cursor_paginated(project, members):
    for n in range(5):
        make_prompt(project, n)
    client = api_client_for(members["admin"])
    first = client.get("/api/v1/projects/alpha/atd/prompts/?page_size=2").json()
    assert len(first["results"]) == 2 and first["next"]
    second = client.get(first["next"]).json()
    assert len(second["results"]) == 2
    assert not {p["id"] for p in first["results"]} & {p["id"] for p in second["results"]}


def test_tie_counts_and_selections_leave_out_position_biased_near_ties(project, members):
    run = make_run(project, [0.5, 0.5, 0.51])
    biased = Score.objects.filter(run=run).order_by("id").first()
    Score.objects.filter(pk=biased.pk).update(q_ab=0.9, q_ba=0.9, position_bias=0.8)
    client = api_client_for(members["curator"])
    url = f"/api/v1/projects/alpha/atd/runs/{run.pk}/tie-counts/"
    data = client.get(url, {"epsilon": 0.02, "histogram": "position_bias"}).json()
    assert data["bias_threshold"] == 0.2
    assert [(k["kept"], k["position_biased"]) for k in data["kept"]] == [(2, 1)]
    assert sum(b["count"] for b in data["histogram"]) == 1 and data["histogram"][16]["count"] == 1  # 0.8
    assert client.get(url, {"bias_threshold": "x"}).status_code == 400
    assert client.get(url, {"histogram": "nope"}).status_code == 400
    frozen = client.post("/api/v1/projects/alpha/atd/selections/", {"run": run.pk, "name": "ties", "epsilon": 0.02},
                         format="json").json()
    assert (frozen["size"], frozen["excluded_biased"], frozen["recipe"]["orders"]) == (2, 1, ["ab", "ba"])
    kept = client.post("/api/v1/projects/alpha/atd/selections/", {"run": run.pk, "name": "ties", "epsilon": 0.02,
                                                                   "include_biased": True}, format="json").json()
    assert (kept["size"], kept["include_biased"]) == (3, True)
