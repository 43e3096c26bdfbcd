from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from dataplatform.accounts.models import ApiToken, Role
from tests.conftest import api_client_for
from tests.factories import MembershipFactory

pytestmark = pytest.mark.django_db


def test_project_list_shows_only_my_projects_with_my_role(project, other_project, members):
    response = api_client_for(members["trainer"]).get("/api/v1/projects/")
    assert [(p["slug"], p["my_role"]) for p in response.json()] == [("alpha", "trainer")]


def test_project_list_has_no_n_plus_one(project, members, django_assert_max_num_queries):
    for i in range(15):
        MembershipFactory(project__slug=f"p{i}", user=members["admin"], role=Role.CURATOR)
    client = api_client_for(members["admin"])
    with django_assert_max_num_queries(6):
        response = client.get("/api/v1/projects/")
    assert len(response.json()) == 16


def test_token_create_shows_the_secret_once_and_lists_without_it(members):
    client = api_client_for(members["admin"])
    created = client.post("/api/v1/tokens/", {"name": "trainer-7", "read_only": True, "projects": ["alpha"]},
                          format="json")
    assert created.status_code == 201 and created["Cache-Control"] == "no-store"
    body = created.json()
    assert body["secret"].startswith(body["prefix"]) and body["projects"] == ["alpha"] and body["read_only"]
    listed = client.get("/api/v1/tokens/").json()
    assert all("secret" not in token for token in listed)
    assert {t["name"] for t in listed} == {"test", "trainer-7"}


def test_token_create_refuses_foreign_projects(members, other_project):
    response = api_client_for(members["admin"]).post("/api/v1/tokens/", {"name": "x", "projects": ["beta"]},
                                                     format="json")
    assert response.status_code == 400 and "beta" in str(response.json()["projects"])


def test_nobody_can_revoke_someone_elses_token(members):
    victim = ApiToken.objects.create(user=members["curator"], name="v", prefix="dp_x", digest="0" * 64)
    response = api_client_for(members["admin"]).post(f"/api/v1/tokens/{victim.pk}/revoke/")
    assert response.status_code == 404
    victim.refresh_from_db()
    assert victim.revoked_at is None


def test_revoke_own_token(members):
    client = api_client_for(members["annotator"])
    own = ApiToken.objects.create(user=members["annotator"], name="old", prefix="dp_y", digest="1" * 64)
    assert client.post(f"/api/v1/tokens/{own.pk}/revoke/").json()["revoked_at"] is not None


def test_openapi_schema_is_served(members):
    response = api_client_for(members["admin"]).get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    assert "/api/v1/projects/{slug}/jobs/" in response.json()["paths"]


def test_a_project_limited_token_cannot_mint_or_revoke_tokens(project, other_project, members):
    """Otherwise a token for one project could create itself an unlimited one."""
    MembershipFactory(project=other_project, user=members["curator"], role=Role.CURATOR)
    limited = api_client_for(members["curator"], projects=[project])
    minted = limited.post("/api/v1/tokens/", {"name": "wider"}, format="json")
    assert minted.status_code == 403 and "limited to some projects" in minted.json()["detail"]
    other = ApiToken.objects.filter(user=members["curator"]).first()
    assert limited.post(f"/api/v1/tokens/{other.pk}/revoke/").status_code == 403
    assert ApiToken.objects.filter(user=members["curator"]).count() == 1
    assert ApiToken.objects.filter(user=members["curator"], revoked_at__isnull=False).count() == 0
    unlimited = api_client_for(members["curator"])
    assert unlimited.post("/api/v1/tokens/", {"name": "fine"}, format="json").status_code == 201


def test_token_create_without_a_lifetime_never_expires(members):
    """Clients written before expiry existed keep getting the tokens they got."""
    body = api_client_for(members["admin"]).post("/api/v1/tokens/", {"name": "old-client"}, format="json").json()
    assert body["expires_at"] is None and body["expired"] is False
    explicit = api_client_for(members["admin"]).post("/api/v1/tokens/", {"name": "n", "expires_in_days": None},
                                                     format="json").json()
    assert explicit["expires_at"] is None


def test_token_create_with_a_lifetime_shows_its_expiry(members):
    client = api_client_for(members["admin"])
    before = timezone.now()
    created = client.post("/api/v1/tokens/", {"name": "ci", "expires_in_days": 30}, format="json")
    assert created.status_code == 201
    expires_at = datetime.fromisoformat(created.json()["expires_at"])
    assert before + timedelta(days=30) <= expires_at <= timezone.now() + timedelta(days=30)
    listed = {t["name"]: t for t in client.get("/api/v1/tokens/").json()}
    assert listed["ci"]["expires_at"] == created.json()["expires_at"] and listed["ci"]["expired"] is False
    assert listed["test"]["expires_at"] is None


@pytest.mark.parametrize("days", [0, -5, 3651, "soon", 2.5])
def test_token_create_refuses_lifetimes_out_of_range(members, days):
    client = api_client_for(members["admin"])
    response = client.post("/api/v1/tokens/", {"name": "bad", "expires_in_days": days}, format="json")
    assert response.status_code == 400 and "expires_in_days" in response.json()
    assert not ApiToken.objects.filter(name="bad").exists()


def test_token_list_marks_expired_tokens(members):
    client = api_client_for(members["admin"])
    old = ApiToken.objects.create(user=members["admin"], name="old", prefix="dp_z", digest="3" * 64,
                                  expires_at=timezone.now() - timedelta(days=1))
    listed = {t["name"]: t for t in client.get("/api/v1/tokens/").json()}
    assert listed["old"]["expired"] is True and listed["test"]["expired"] is False
    assert client.post(f"/api/v1/tokens/{old.pk}/revoke/").json()["expired"] is True
