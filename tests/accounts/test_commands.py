import io

import pytest
from django.core.management import CommandError, call_command

from dataplatform.accounts import services
from dataplatform.accounts.models import ApiToken, Membership, Project
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_createproject_with_members():
    UserFactory(username="alice")
    call_command("createproject", "gamma", "Gamma", "--member", "alice:curator", stdout=io.StringIO())
    project = Project.objects.get(slug="gamma")
    assert Membership.objects.get(project=project, user__username="alice").role == "curator"


@pytest.mark.parametrize("member, message", [("alice:boss", "role must be one of"), ("nobody:admin", "no user named")])
def test_createproject_rejects_bad_members_and_writes_nothing(member, message):
    UserFactory(username="alice")
    with pytest.raises(CommandError, match=message):
        call_command("createproject", "gamma", "Gamma", "--member", member)
    assert not Project.objects.filter(slug="gamma").exists()


def test_issuetoken_prints_a_working_secret_once(project, members):
    out, err = io.StringIO(), io.StringIO()
    call_command("issuetoken", "trainer", "--read-only", "--project", "alpha", stdout=out, stderr=err)
    secret = out.getvalue().strip()
    token = services.authenticate_token(secret=secret)
    assert token is not None and token.read_only
    assert list(token.projects.values_list("slug", flat=True)) == ["alpha"]
    assert secret not in err.getvalue()
    assert ApiToken.objects.filter(digest=services.hash_token_secret(secret)).count() == 1


def test_issuetoken_unknown_user():
    with pytest.raises(CommandError, match="No user named"):
        call_command("issuetoken", "ghost")


def test_issuetoken_with_a_lifetime(project, members):
    out, err = io.StringIO(), io.StringIO()
    call_command("issuetoken", "trainer", "--expires-in-days", "7", stdout=out, stderr=err)
    token = services.authenticate_token(secret=out.getvalue().strip())
    assert token.expires_at is not None and f"expires {token.expires_at:%Y-%m-%d %H:%M} UTC" in err.getvalue()


def test_issuetoken_without_a_lifetime_never_expires(project, members):
    out, err = io.StringIO(), io.StringIO()
    call_command("issuetoken", "trainer", stdout=out, stderr=err)
    assert services.authenticate_token(secret=out.getvalue().strip()).expires_at is None
    assert "never expires" in err.getvalue()


@pytest.mark.parametrize("days", ["0", "3651"])
def test_issuetoken_refuses_a_lifetime_out_of_range(project, members, days):
    with pytest.raises(CommandError, match="1 to 3650 days"):
        call_command("issuetoken", "trainer", "--expires-in-days", days, stdout=io.StringIO(), stderr=io.StringIO())
    assert not ApiToken.objects.filter(user=members["trainer"]).exists()
