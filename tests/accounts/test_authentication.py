"""API token authentication and expiry: valid, expired (401 that says when), never-expiring tokens."""

import random
from datetime import UTC, datetime

import pytest
from django.http import Http404
from rest_framework.test import APIClient

from dataplatform.accounts import services
from dataplatform.accounts.models import ApiToken, Role
from dataplatform.accounts.permissions import project_for, token_project_ids
from dataplatform.audit.models import Action, AuditEvent
from tests.factories import MembershipFactory

pytestmark = pytest.mark.django_db

EXPIRED_ON = datetime(2025, 12, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def ip():
    """A fresh address per test (198.18.0.0/15 is reserved for tests), so counters never leak between tests."""
    return f"198.{random.randint(18, 19)}.{random.randint(0, 255)}.{random.randint(1, 254)}"


def get_projects(secret: str, ip: str = "127.0.0.1"):
    client = APIClient(REMOTE_ADDR=ip)
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client.get("/api/v1/projects/")


def expired_token(user, name="old") -> tuple[ApiToken, str]:
    token, secret = services.issue_token(user=user, name=name, expires_in_days=30)
    ApiToken.objects.filter(pk=token.pk).update(expires_at=EXPIRED_ON)
    return token, secret


def test_token_that_has_not_expired_works(members):
    _, secret = services.issue_token(user=members["trainer"], name="t", expires_in_days=1)
    assert get_projects(secret).status_code == 200


def test_token_without_expiry_works(members):
    _, secret = services.issue_token(user=members["trainer"], name="t")
    assert get_projects(secret).status_code == 200


def test_expired_token_is_a_401_that_says_when_and_what_to_do(members):
    _, secret = expired_token(members["trainer"])
    response = get_projects(secret)
    assert response.status_code == 401
    assert response.json() == {"detail": "Token expired on 2025-12-01; create a new one."}
    assert response["WWW-Authenticate"] == 'Token realm="api"'


def test_unknown_token_says_nothing_about_expiry(members):
    expired_token(members["trainer"])
    response = get_projects("dp_" + "Q" * 43)
    assert response.status_code == 401 and response.json() == {"detail": "Invalid or revoked token."}


def test_expired_token_is_not_counted_as_a_failed_attempt(members, settings, ip):
    """Only the real secret is told it expired, so it is no guess; counting it would let one forgotten
    job with an old token lock every client behind the same address out of the API."""
    settings.TOKEN_FAILURE_LIMIT = 2
    _, old = expired_token(members["trainer"])
    _, fresh = services.issue_token(user=members["curator"], name="fresh")
    for _ in range(5):
        assert get_projects(old, ip).status_code == 401
    assert get_projects(fresh, ip).status_code == 200
    for _ in range(2):
        assert get_projects("dp_" + "Q" * 43, ip).status_code == 401
    assert get_projects(old, ip).status_code == 429  # a locked-out client's tokens are not checked at all


def test_expired_token_use_is_audited_once_per_hour(members, ip):
    token, secret = expired_token(members["trainer"])
    for _ in range(3):
        get_projects(secret, ip)
    event = AuditEvent.objects.get(action=Action.TOKEN_EXPIRED_USED)
    assert (event.target_id, event.actor_name, event.client_ip) == (str(token.pk), "trainer", ip)
    assert event.detail["token_name"] == "old" and event.detail["expired_at"] == EXPIRED_ON.isoformat()
    assert secret not in str(event.detail)
    assert not AuditEvent.objects.filter(action=Action.TOKEN_USED).exists()


def test_authentication_reads_whether_the_token_is_limited_with_the_token(members, project, other_project,
                                                                          django_assert_num_queries):
    """An unlimited token costs no scope query afterwards; a limited one still sees only its projects."""
    MembershipFactory(project=other_project, user=members["admin"], role=Role.ADMIN)
    _, open_secret = services.issue_token(user=members["admin"], name="open")
    _, narrow_secret = services.issue_token(user=members["admin"], name="narrow", projects=[project])
    unlimited = services.authenticate_token(secret=open_secret)
    limited = services.authenticate_token(secret=narrow_secret)
    assert unlimited.is_scoped is False and limited.is_scoped is True
    with django_assert_num_queries(0):
        assert token_project_ids(unlimited) == []
    assert token_project_ids(limited) == [project.pk]
    assert [p["slug"] for p in get_projects(narrow_secret).json()] == [project.slug]
    assert len(get_projects(open_secret).json()) == 2
    with pytest.raises(Http404):
        project_for(members["admin"], other_project.slug, {"admin"}, token=limited)
