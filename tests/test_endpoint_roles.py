"""Every API endpoint, called by every role (and an outsider, and anonymously).

Expected statuses: 2xx allowed; 403 a member whose role may not; 404 not a member
(another project's objects do not exist for you); 401 no credentials.
"""

import pytest
from rest_framework.test import APIClient

from dataplatform.jobs.models import Job

from .conftest import api_client_for

pytestmark = pytest.mark.django_db

ROLES = ["admin", "curator", "annotator", "trainer", "outsider", "anonymous"]


@pytest.fixture
def job(project, members):
    return Job.objects.create(project=project, kind="demo.sample_continuations", params={"prompt": "x"},
                              created_by=members["curator"])


def client_as(members, who: str) -> APIClient:
    return APIClient() if who == "anonymous" else api_client_for(members[who])


# (method, url template, body, {role: expected status})
MATRIX = [
    ("get", "/api/v1/projects/", None,
     {"admin": 200, "curator": 200, "annotator": 200, "trainer": 200, "outsider": 200, "anonymous": 401}),
    ("get", "/api/v1/projects/alpha/jobs/", None,
     {"admin": 200, "curator": 200, "annotator": 403, "trainer": 403, "outsider": 404, "anonymous": 401}),
    ("post", "/api/v1/projects/alpha/jobs/", {"kind": "demo.sample_continuations", "params": {"prompt": "hi"}},
     {"admin": 202, "curator": 202, "annotator": 403, "trainer": 403, "outsider": 404, "anonymous": 401}),
    ("get", "/api/v1/jobs/{job}/", None,
     {"admin": 200, "curator": 200, "annotator": 404, "trainer": 404, "outsider": 404, "anonymous": 401}),
    ("post", "/api/v1/jobs/{job}/cancel/", None,
     {"admin": 200, "curator": 200, "annotator": 404, "trainer": 404, "outsider": 404, "anonymous": 401}),
    ("get", "/api/v1/tokens/", None,
     {"admin": 200, "curator": 200, "annotator": 200, "trainer": 200, "outsider": 200, "anonymous": 401}),
    ("post", "/api/v1/tokens/", {"name": "x"},
     {"admin": 201, "curator": 201, "annotator": 201, "trainer": 201, "outsider": 201, "anonymous": 401}),
    ("get", "/api/v1/system/status/", None,
     {"admin": 200, "curator": 200, "annotator": 200, "trainer": 200, "outsider": 200, "anonymous": 401}),
]


@pytest.mark.parametrize("who", ROLES)
@pytest.mark.parametrize("method, url, body, expected", MATRIX, ids=[f"{m} {u}" for m, u, _, _ in MATRIX])
def test_endpoint_status_for_role(members, job, who, method, url, body, expected, django_capture_on_commit_callbacks,
                                  monkeypatch):
    # Health probes and job publishing are exercised elsewhere; here only the access rules matter.
    monkeypatch.setattr("dataplatform.system.api.platform_status", lambda: [])
    client = client_as(members, who)
    with django_capture_on_commit_callbacks(execute=False):
        response = getattr(client, method)(url.format(job=job.pk), body, format="json")
    assert response.status_code == expected[who], response.content


def test_read_only_token_cannot_write(members):
    client = api_client_for(members["curator"], read_only=True)
    assert client.get("/api/v1/projects/alpha/jobs/").status_code == 200
    response = client.post("/api/v1/projects/alpha/jobs/", {"kind": "demo.sample_continuations",
                                                              "params": {"prompt": "hi"}}, format="json")
    assert response.status_code == 403
    assert not Job.objects.exists()


def test_bearer_keyword_works_and_revoked_token_is_401(members):
    from dataplatform.accounts import services

    token, secret = services.issue_token(user=members["trainer"], name="t")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.get("/api/v1/projects/").status_code == 200
    services.revoke_token(token=token)
    assert client.get("/api/v1/projects/").status_code == 401


def test_garbage_token_is_401(members):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert client.get("/api/v1/projects/").status_code == 401
