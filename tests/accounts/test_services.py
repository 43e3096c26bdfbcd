import pytest

from dataplatform.accounts import services
from dataplatform.accounts.models import ApiToken, Membership, Role

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


def test_authenticate_records_last_use(members):
    token, secret = services.issue_token(user=members["trainer"], name="t")
    assert token.last_used_at is None
    services.authenticate_token(secret=secret)
    assert ApiToken.objects.get(pk=token.pk).last_used_at is not None


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
