import re
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.timezone import localtime

from dataplatform.accounts.models import ApiToken

pytestmark = pytest.mark.django_db


def test_pages_require_login(client):
    for name, args in [("project-list", []), ("project-detail", ["alpha"]), ("token-list", []), ("system", [])]:
        response = client.get(reverse(name, args=args))
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_login_and_logout(client, members):
    response = client.post(reverse("login"), {"username": "curator", "password": "pw-for-tests-only"})
    assert response.status_code == 302
    assert client.get(reverse("project-list")).status_code == 200
    client.post(reverse("logout"))
    assert client.get(reverse("project-list")).status_code == 302


def test_wrong_password_says_so(client, members):
    response = client.post(reverse("login"), {"username": "curator", "password": "nope"})
    assert "did not match" in response.content.decode()


def test_project_list_shows_only_my_projects(client, members, project, other_project):
    client.force_login(members["annotator"])
    html = client.get(reverse("project-list")).content.decode()
    assert "Alpha" in html and "Beta" not in html


@pytest.mark.parametrize("who, status, sees_jobs, sees_form", [
    ("admin", 200, True, True), ("curator", 200, True, True), ("annotator", 200, False, False),
    ("trainer", 200, False, False), ("outsider", 404, False, False),
])
def test_project_page_by_role(client, members, project, who, status, sees_jobs, sees_form):
    client.force_login(members[who])
    response = client.get(reverse("project-detail", args=["alpha"]))
    assert response.status_code == status
    html = response.content.decode()
    assert ('id="jobs-title"' in html) == sees_jobs
    assert ('name="prompt"' in html) == sees_form


def test_create_token_shows_the_secret_once_then_revoke(client, members):
    client.force_login(members["trainer"])
    response = client.post(reverse("token-list"), {"name": "node-1", "read_only": "1"})
    html = response.content.decode()
    token = ApiToken.objects.get(user=members["trainer"], name="node-1")
    assert token.read_only and 'id="new-secret"' in html and response["Cache-Control"] == "no-store"
    assert 'id="new-secret"' not in client.get(reverse("token-list")).content.decode()
    client.post(reverse("token-revoke", args=[token.pk]))
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None


def test_cannot_revoke_another_users_token_from_the_page(client, members):
    theirs = ApiToken.objects.create(user=members["curator"], name="v", prefix="dp_x", digest="2" * 64)
    client.force_login(members["trainer"])
    assert client.post(reverse("token-revoke", args=[theirs.pk])).status_code == 404


def test_token_form_offers_lifetimes_with_90_days_by_default(client, members):
    client.force_login(members["trainer"])
    html = client.get(reverse("token-list")).content.decode()
    select = re.search(r'<select name="expires_in_days".*?</select>', html, re.S).group()
    options = re.findall(r'<option value="(\w+)"( selected)?>', select)
    assert options == [("30", ""), ("90", " selected"), ("365", ""), ("never", "")]


@pytest.mark.parametrize("choice, days", [("30", 30), ("90", 90), ("365", 365), ("never", None)])
def test_token_form_sets_the_chosen_lifetime(client, members, choice, days):
    client.force_login(members["trainer"])
    before = timezone.now()
    html = client.post(reverse("token-list"), {"name": "node", "expires_in_days": choice}).content.decode()
    token = ApiToken.objects.get(user=members["trainer"], name="node")
    if days is None:
        assert token.expires_at is None and "It never expires." in html
    else:
        assert before + timedelta(days=days) <= token.expires_at <= timezone.now() + timedelta(days=days)
        assert f"It expires on {token.expires_at:%Y-%m-%d}." in html


def test_token_form_refuses_a_lifetime_it_does_not_offer(client, members):
    client.force_login(members["trainer"])
    html = client.post(reverse("token-list"), {"name": "node", "expires_in_days": "9999"}).content.decode()
    assert "Choose when the token expires" in html and 'id="new-secret"' not in html
    assert not ApiToken.objects.filter(user=members["trainer"]).exists()


def test_token_list_shows_expiry_and_marks_expired_tokens(client, members):
    ApiToken.objects.create(user=members["trainer"], name="forever", prefix="dp_a", digest="4" * 64)
    ApiToken.objects.create(user=members["trainer"], name="old", prefix="dp_b", digest="5" * 64,
                            expires_at=datetime(2025, 12, 1, 9, 30, tzinfo=UTC))
    client.force_login(members["trainer"])
    html = client.get(reverse("token-list")).content.decode()
    rows = {name: row for row in re.findall(r"<tr>(.*?)</tr>", html, re.S)
            for name in re.findall(r'<td translate="no">(\w+)</td>', row)[:1]}
    expiry = date_format(localtime(datetime(2025, 12, 1, 9, 30, tzinfo=UTC)), "SHORT_DATETIME_FORMAT")
    assert expiry in rows["old"] and '<span class="bad">expired</span>' in rows["old"]
    assert "Revoke" not in rows["old"]
    assert "expired" not in rows["forever"] and "Revoke" in rows["forever"]
