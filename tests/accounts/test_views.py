import pytest
from django.urls import reverse

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
