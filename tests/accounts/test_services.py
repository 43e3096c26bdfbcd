from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from dataplatform.accounts import services
from dataplatform.accounts.models import ApiToken, Membership, Role
from dataplatform.audit.models import Action, AuditEvent

pytestmark = pytest.mark.django_db


def test_token_secret_is_stored_only_as_its_hash(members):
    token, secret = services.issue_token(user=members["trainer"], name="trainer-node")
    row = ApiToken.objects.get(pk=token.pk)
    assert secret.startswith("dp_") and len(secret) > 40
    assert row.digest == services.hash_token_secret(secret)
    assert secret not in {row.digest, row.prefix, row.name}
    assert secret.startswith(row.prefix)


def test_authenticate_accepts_the_secret_and_rejects_others(members):
    token, secret = services.issue_token(user=members["trainer"], name="t")
    assert services.authenticate_token(secret=secret) == token
    assert services.authenticate_token(secret=secret + "x") is None
    assert services.authenticate_token(secret="") is None


def test_the_authenticated_token_and_its_user_are_the_rows_as_the_orm_reads_them(members, django_assert_num_queries):
    """Authentication reads token and user with one hand-written statement; every field must come out as the
    ORM's own read gives it (types, time zones, the column each value lands in)."""
    token, secret = services.issue_token(user=members["trainer"], name="t", read_only=True, expires_in_days=30)
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())  # not refreshed again this minute
    with django_assert_num_queries(1):
        authenticated = services.authenticate_token(secret=secret)
        user = authenticated.user
    expected = ApiToken.objects.select_related("user").get(pk=token.pk)
    for field in ApiToken._meta.concrete_fields:
        assert getattr(authenticated, field.attname) == getattr(expected, field.attname), field.name
    for field in type(user)._meta.concrete_fields:
        assert getattr(user, field.attname) == getattr(expected.user, field.attname), field.name
    assert timezone.is_aware(authenticated.expires_at) and authenticated.read_only is True
    assert authenticated.is_scoped is False and authenticated._state.adding is False


def test_revoked_token_no_longer_authenticates(members):
    token, secret = services.issue_token(user=members["trainer"], name="t")
    services.revoke_token(token=token)
    assert services.authenticate_token(secret=secret) is None
    first_revocation = ApiToken.objects.get(pk=token.pk).revoked_at
    services.revoke_token(token=token)  # revoking twice keeps the first time
    assert ApiToken.objects.get(pk=token.pk).revoked_at == first_revocation


def test_token_of_inactive_user_does_not_authenticate(members):
    _, secret = services.issue_token(user=members["trainer"], name="t")
    members["trainer"].is_active = False
    members["trainer"].save()
    assert services.authenticate_token(secret=secret) is None


def test_authentication_writes_nothing_and_noting_the_use_records_it(members):
    token, secret = services.issue_token(user=members["trainer"], name="t")
    authenticated = services.authenticate_token(secret=secret)
    assert ApiToken.objects.get(pk=token.pk).last_used_at is None  # API auth notes it after the response
    assert not AuditEvent.objects.filter(action=Action.TOKEN_USED).exists()
    services.note_token_use(token=authenticated, client_ip="192.0.2.1")
    assert ApiToken.objects.get(pk=token.pk).last_used_at is not None
    used = AuditEvent.objects.get(action=Action.TOKEN_USED)
    assert (used.target_id, used.client_ip) == (str(token.pk), "192.0.2.1")


def test_token_cannot_be_scoped_to_a_project_the_user_is_not_in(members, other_project):
    with pytest.raises(ValueError, match="not a member"):
        services.issue_token(user=members["admin"], name="t", projects=[other_project])


def test_create_project_makes_the_creator_admin(members):
    project = services.create_project(slug="gamma", name="Gamma", admin=members["outsider"])
    assert Membership.objects.get(project=project, user=members["outsider"]).role == Role.ADMIN


def test_set_membership_changes_the_role_in_place(project, members):
    services.set_membership(project=project, user=members["annotator"], role="curator")
    assert Membership.objects.filter(project=project, user=members["annotator"]).count() == 1
    assert Membership.objects.get(project=project, user=members["annotator"]).role == Role.CURATOR


def expire(token: ApiToken, *, ago: timedelta = timedelta(seconds=1)) -> None:
    """Move a token's expiry into the past (as if its lifetime had run out)."""
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - ago)


def test_token_expiry_is_computed_from_the_lifetime(members):
    before = timezone.now()
    token, _ = services.issue_token(user=members["trainer"], name="t", expires_in_days=30)
    after = timezone.now()
    assert before + timedelta(days=30) <= ApiToken.objects.get(pk=token.pk).expires_at <= after + timedelta(days=30)
    assert not token.is_expired and token.is_active


def test_token_without_a_lifetime_never_expires(members):
    token, secret = services.issue_token(user=members["trainer"], name="t")
    assert token.expires_at is None and not token.is_expired
    assert services.authenticate_token(secret=secret) == token


@pytest.mark.parametrize("days", [1, 3650])
def test_lifetime_bounds_are_accepted(members, days):
    now = timezone.now()
    assert services.token_expiry(days, now=now) == now + timedelta(days=days)
    token, _ = services.issue_token(user=members["trainer"], name="t", expires_in_days=days)
    assert token.expires_at is not None


@pytest.mark.parametrize("days", [0, -1, 3651, True, 1.5, "30"])
def test_lifetimes_out_of_range_are_refused_and_nothing_is_made(members, days):
    with pytest.raises(ValueError, match="1 to 3650 days"):
        services.issue_token(user=members["trainer"], name="t", expires_in_days=days)
    assert not ApiToken.objects.filter(user=members["trainer"]).exists()


def test_expiry_is_recorded_when_the_token_is_created(members):
    token, _ = services.issue_token(user=members["trainer"], name="t", expires_in_days=90)
    created = AuditEvent.objects.get(action=Action.TOKEN_CREATED, target_id=str(token.pk))
    assert created.detail["expires_at"] == token.expires_at.isoformat()


def test_token_is_expired_from_its_expiry_instant_on(members, monkeypatch):
    token, _ = services.issue_token(user=members["trainer"], name="t", expires_in_days=1)
    monkeypatch.setattr(timezone, "now", lambda: token.expires_at - timedelta(microseconds=1))
    assert not token.is_expired
    monkeypatch.setattr(timezone, "now", lambda: token.expires_at)
    assert token.is_expired and not token.is_active


def test_expired_token_raises_with_its_expiry_date(members):
    token, secret = services.issue_token(user=members["trainer"], name="t", expires_in_days=1)
    ApiToken.objects.filter(pk=token.pk).update(expires_at=datetime(2025, 12, 1, 23, 30, tzinfo=UTC))
    with pytest.raises(services.TokenExpired) as raised:
        services.authenticate_token(secret=secret)
    assert raised.value.token == token
    assert str(raised.value) == "Token expired on 2025-12-01"
    assert ApiToken.objects.get(pk=token.pk).last_used_at is None  # a refused use is no use


def test_expired_token_that_is_revoked_or_of_an_inactive_user_is_just_unknown(members):
    """Only a token that would otherwise work gets the 'expired' answer."""
    revoked, revoked_secret = services.issue_token(user=members["trainer"], name="r", expires_in_days=1)
    expire(revoked)
    services.revoke_token(token=revoked)
    assert services.authenticate_token(secret=revoked_secret) is None
    _, inactive_secret = services.issue_token(user=members["curator"], name="i", expires_in_days=1)
    expire(ApiToken.objects.get(user=members["curator"]))
    members["curator"].is_active = False
    members["curator"].save()
    assert services.authenticate_token(secret=inactive_secret) is None
