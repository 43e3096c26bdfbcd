"""GET /api/v1/audit/ and the /audit/ page, for every role."""

import pytest
from rest_framework.test import APIClient

from dataplatform.audit import services
from dataplatform.audit.models import Action
from tests.conftest import api_client_for
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def events(members, project, other_project):
    services.record(action=Action.MEMBERSHIP_SET, actor=members["admin"], project=project, detail={"n": 1})
    services.record(action=Action.EXPORT_CREATED, actor=members["curator"], project=project)
    services.record(action=Action.EXPORT_CREATED, actor=members["outsider"], project=other_project)
    services.record(action=Action.LOCKED_OUT, client_ip="192.0.2.1")


def listed(response):
    return sorted((e["action"], e["project"]) for e in response.json()["results"])


@pytest.mark.parametrize("who, status", [("admin", 200), ("curator", 403), ("annotator", 403), ("trainer", 403),
                                         ("outsider", 403)])
def test_api_status_for_role(members, events, who, status):
    assert api_client_for(members[who]).get("/api/v1/audit/").status_code == status


def test_api_anonymous_is_401(events):
    assert APIClient().get("/api/v1/audit/").status_code == 401


def test_project_admin_sees_only_their_projects(members, events):
    response = api_client_for(members["admin"]).get("/api/v1/audit/")
    assert listed(response) == [("export.created", "alpha"), ("membership.set", "alpha")]
    # Another project: 404; filtering on their own works.
    assert api_client_for(members["admin"]).get("/api/v1/audit/?project=beta").status_code == 404
    assert listed(api_client_for(members["admin"]).get("/api/v1/audit/?project=alpha&action=export.created")) == [
        ("export.created", "alpha")]


def test_superuser_sees_everything_and_filters(events):
    root = UserFactory(username="root", is_superuser=True)
    client = api_client_for(root)
    # the four, plus the creation of root's token; its first use is recorded once that answer has gone out
    assert len(client.get("/api/v1/audit/").json()["results"]) == 4 + 1
    assert len(client.get("/api/v1/audit/").json()["results"]) == 4 + 2
    assert listed(client.get("/api/v1/audit/?actor=outsider")) == [("export.created", "beta")]
    assert listed(client.get("/api/v1/audit/?action=auth.locked_out")) == [("auth.locked_out", None)]
    assert client.get("/api/v1/audit/?since=2999-01-01T00:00:00Z").json()["results"] == []
    assert client.get("/api/v1/audit/?action=nonsense").status_code == 400
    page = client.get("/api/v1/audit/?page_size=2").json()
    assert len(page["results"]) == 2 and page["next"]


def test_a_token_scoped_to_another_project_sees_nothing_of_this_one(members, events, other_project):
    MembershipFactory(project=other_project, user=members["admin"], role="admin")
    client = api_client_for(members["admin"], projects=[other_project])
    assert listed(client.get("/api/v1/audit/")) == [("export.created", "beta")]


def test_list_query_count_does_not_grow(members, events, django_assert_max_num_queries, project):
    for _ in range(20):
        services.record(action=Action.EXPORT_DELETED, actor=members["admin"], project=project)
    client = api_client_for(members["admin"])
    with django_assert_max_num_queries(8):
        assert client.get("/api/v1/audit/").status_code == 200


@pytest.mark.parametrize("who, status", [("admin", 200), ("curator", 403), ("annotator", 403), ("trainer", 403),
                                         ("outsider", 403)])
def test_page_status_for_role(client, members, events, who, status):
    client.force_login(members[who])
    assert client.get("/audit/").status_code == status


def test_page_shows_the_admins_events_and_is_linked(client, members, events):
    client.force_login(members["admin"])
    page = client.get("/audit/?action=export.created").content.decode()
    assert "curator" in page and "outsider" not in page and "auth.locked_out</code>" not in page
    assert 'href="/audit/"' in client.get("/").content.decode()
    assert "/audit/?project=alpha" in client.get("/projects/alpha/").content.decode()
    client.force_login(members["curator"])
    assert 'href="/audit/"' not in client.get("/").content.decode()


def test_page_anonymous_is_sent_to_log_in(client):
    response = client.get("/audit/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
