"""The members API, /api/v1/projects/<slug>/members/: project admins only, per role; and the project license."""

import pytest
from rest_framework.test import APIClient

from dataplatform.accounts.models import Membership, Project, Role
from dataplatform.audit.models import Action, AuditEvent
from tests.conftest import api_client_for
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

MEMBERS = "/api/v1/projects/alpha/members/"
WHO = ["admin", "superuser", "curator", "annotator", "trainer", "outsider", "anonymous"]
# Admins (a superuser is every project's admin) get through; other members 403; non-members 404; no token 401.
REFUSED = {"curator": 403, "annotator": 403, "trainer": 403, "outsider": 404, "anonymous": 401}


@pytest.fixture
def people(members):
    UserFactory(username="newcomer")
    return {**members, "superuser": UserFactory(username="root", is_superuser=True, is_staff=True)}


def client_as(people, who: str) -> APIClient:
    return APIClient() if who == "anonymous" else api_client_for(people[who])


def role_of(username: str, slug: str = "alpha") -> str | None:
    return (Membership.objects.filter(project__slug=slug, user__username=username)
            .values_list("role", flat=True).first())


@pytest.mark.parametrize("who", WHO)
def test_list(people, who):
    response = client_as(people, who).get(MEMBERS)
    if who in REFUSED:
        assert response.status_code == REFUSED[who]
        return
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"next", "previous", "results"}
    assert {(m["username"], m["role"]) for m in body["results"]} == {
        ("admin", "admin"), ("curator", "curator"), ("annotator", "annotator"), ("trainer", "trainer")}
    assert all(set(m) == {"username", "role", "created_at"} for m in body["results"])


@pytest.mark.parametrize("who", WHO)
def test_add(people, who):
    response = client_as(people, who).post(MEMBERS, {"username": "newcomer", "role": "trainer"}, format="json")
    if who in REFUSED:
        assert response.status_code == REFUSED[who] and role_of("newcomer") is None
        assert not AuditEvent.objects.filter(action=Action.MEMBERSHIP_ADDED).exists()
        return
    assert response.status_code == 201
    assert response.json()["username"] == "newcomer" and response.json()["role"] == "trainer"
    assert role_of("newcomer") == "trainer"
    event = AuditEvent.objects.get(action=Action.MEMBERSHIP_ADDED)
    assert event.actor == people[who] and event.project.slug == "alpha" and event.client_ip == "127.0.0.1"


@pytest.mark.parametrize("who", WHO)
def test_change_role(people, who):
    response = client_as(people, who).patch(f"{MEMBERS}annotator/", {"role": "curator"}, format="json")
    if who in REFUSED:
        assert response.status_code == REFUSED[who] and role_of("annotator") == "annotator"
        return
    assert response.status_code == 200 and response.json()["role"] == "curator"
    assert role_of("annotator") == "curator"
    assert AuditEvent.objects.get(action=Action.MEMBERSHIP_ROLE_CHANGED).actor == people[who]


@pytest.mark.parametrize("who", WHO)
def test_remove(people, who):
    response = client_as(people, who).delete(f"{MEMBERS}trainer/")
    if who in REFUSED:
        assert response.status_code == REFUSED[who] and role_of("trainer") == "trainer"
        return
    assert response.status_code == 204 and role_of("trainer") is None
    assert AuditEvent.objects.get(action=Action.MEMBERSHIP_REMOVED).actor == people[who]


def test_the_refusals_are_answered_with_their_reasons(people):
    admin = client_as(people, "admin")
    unknown = admin.post(MEMBERS, {"username": "ghost", "role": "annotator"}, format="json")
    assert unknown.status_code == 400 and unknown.json() == {"username": ["No user named 'ghost'."]}
    bad_role = admin.post(MEMBERS, {"username": "newcomer", "role": "boss"}, format="json")
    assert bad_role.status_code == 400
    assert bad_role.json() == {"role": ["'boss' is not a role; the roles are admin, curator, annotator, trainer."]}
    again = admin.post(MEMBERS, {"username": "curator", "role": "admin"}, format="json")
    assert again.status_code == 409 and "already a member of alpha (as curator)" in again.json()["detail"]
    missing = admin.post(MEMBERS, {}, format="json")
    assert missing.status_code == 400 and set(missing.json()) == {"username", "role"}

    last = admin.patch(f"{MEMBERS}admin/", {"role": "trainer"}, format="json")
    assert last.status_code == 400 and "admin is the last admin of alpha" in last.json()["detail"]
    assert admin.delete(f"{MEMBERS}admin/").status_code == 400
    assert role_of("admin") == "admin"
    patch_bad_role = admin.patch(f"{MEMBERS}curator/", {"role": "owner"}, format="json")
    assert patch_bad_role.status_code == 400 and "the roles are" in patch_bad_role.json()["role"][0]


def test_someone_who_is_not_a_member_is_a_404(people):
    admin = client_as(people, "admin")
    for username in ("outsider", "ghost"):
        assert admin.patch(f"{MEMBERS}{username}/", {"role": "curator"}, format="json").status_code == 404
        assert admin.delete(f"{MEMBERS}{username}/").status_code == 404


def test_another_project_s_member_cannot_be_reached_through_this_project(people, other_project):
    MembershipFactory(project=other_project, user=UserFactory(username="bob"), role=Role.ADMIN)
    MembershipFactory(project=other_project, user=UserFactory(username="carol"), role=Role.CURATOR)
    admin = client_as(people, "admin")
    assert admin.delete(f"{MEMBERS}carol/").status_code == 404
    assert admin.patch(f"{MEMBERS}carol/", {"role": "trainer"}, format="json").status_code == 404
    assert admin.get("/api/v1/projects/beta/members/").status_code == 404  # alpha's admin is no member of beta
    assert admin.delete("/api/v1/projects/beta/members/carol/").status_code == 404
    assert role_of("carol", "beta") == "curator"


def test_a_read_only_token_lists_but_does_not_change(people):
    client = api_client_for(people["admin"], read_only=True)
    assert client.get(MEMBERS).status_code == 200
    assert client.post(MEMBERS, {"username": "newcomer", "role": "trainer"}, format="json").status_code == 403
    assert client.delete(f"{MEMBERS}trainer/").status_code == 403
    assert role_of("newcomer") is None and role_of("trainer") == "trainer"


def test_a_token_limited_to_another_project_does_not_reach_this_one(people, other_project):
    MembershipFactory(project=other_project, user=people["admin"], role=Role.ADMIN)
    client = api_client_for(people["admin"], projects=[other_project])
    assert client.get(MEMBERS).status_code == 404
    assert client.get("/api/v1/projects/beta/members/").status_code == 200


def test_the_list_is_paginated_with_a_cursor_and_has_no_n_plus_one(people, project, django_assert_max_num_queries):
    for i in range(12):
        MembershipFactory(project=project, user=UserFactory(username=f"m{i:02}"), role=Role.ANNOTATOR)
    client = client_as(people, "admin")
    seen, url = [], f"{MEMBERS}?page_size=5"
    while url:
        with django_assert_max_num_queries(6):
            body = client.get(url).json()
        assert len(body["results"]) <= 5
        seen += [m["username"] for m in body["results"]]
        url = body["next"]
    assert len(seen) == len(set(seen)) == 16
    assert seen[:2] == ["m11", "m10"]  # newest first
    assert client.get(f"{MEMBERS}?page_size=0").status_code == 400


def test_the_project_list_shows_the_license(people):
    Project.objects.filter(slug="alpha").update(license="cc-by-4.0")
    listed = client_as(people, "trainer").get("/api/v1/projects/").json()
    assert [(p["slug"], p["license"]) for p in listed] == [("alpha", "cc-by-4.0")]
