"""A NUL in a request's path or query string (PostgreSQL refuses NUL in text, so any lookup with it would end in
a 500) is a 404 (path) or a 400 (query) for every endpoint, API and page, before any view runs
(dataplatform/request_guard.py)."""

import pytest
from django.test import Client
from django.test.client import RequestFactory

from dataplatform.accounts import services as account_services
from dataplatform.accounts.models import Membership, Project
from dataplatform.errors import PlatformError
from dataplatform.request_guard import unstorable_request_middleware
from tests.conftest import api_client_for
from tests.page_roles import logged_in

pytestmark = pytest.mark.django_db

API_PATHS = [
    ("patch", "/api/v1/projects/alpha/members/%00/"),
    ("delete", "/api/v1/projects/alpha/members/%00/"),
    ("get", "/api/v1/projects/alpha/members/carol%00x/"),
    ("get", "/api/v1/projects/alpha/exports/1/shards/README%00.md"),
    ("post", "/api/v1/projects/alpha/labeler/claims/1/%00/"),
    ("get", "/api/v1/projects/al%00pha/members/"),
    ("get", "/api/v1/no-such%00-route/"),
]
API_QUERIES = [
    "/api/v1/projects/alpha/aed/traces/?environment=%00",
    "/api/v1/projects/alpha/aed/traces/?harness=a%00b",
    "/api/v1/projects/alpha/exports/?kind=%00",
    "/api/v1/projects/alpha/members/?x%00=1",
    "/api/v1/projects/?cursor=%00",
]


@pytest.mark.parametrize(("method", "path"), API_PATHS)
def test_a_nul_in_an_api_path_is_a_json_404(members, method, path):
    response = getattr(api_client_for(members["admin"]), method)(path, {"role": "curator"}, format="json")
    assert response.status_code == 404, response.content[:300]
    assert response.json() == {"detail": "Not found."}
    assert Membership.objects.filter(project__slug="alpha").count() == len(members) - 1  # the outsider is none


@pytest.mark.parametrize("path", API_QUERIES)
def test_a_nul_in_an_api_query_is_a_json_400(members, path):
    response = api_client_for(members["admin"]).get(path)
    assert response.status_code == 400, response.content[:300]
    assert "NUL" in response.json()["detail"]


def test_anonymous_requests_get_the_same_answers():
    assert Client().patch("/api/v1/projects/alpha/members/%00/").status_code == 404
    assert Client().get("/api/v1/projects/alpha/aed/traces/?environment=%00").status_code == 400


@pytest.mark.parametrize(("method", "path", "status"), [
    ("post", "/projects/alpha/members/%00/role", 404),
    ("post", "/projects/alpha/members/%00/remove", 404),
    ("get", "/projects/alpha/aed/?environment=%00", 400),
    ("get", "/projects/alpha/labeler/?q=%00", 400),
    ("get", "/audit/?actor=%00", 400),
])
def test_a_nul_on_a_page_is_a_404_or_400(client, members, method, path, status):
    client = logged_in(client, members, "admin")
    response = client.post(path, {"role": "curator"}) if method == "post" else client.get(path)
    assert response.status_code == status, response.content[:300]
    assert Membership.objects.filter(project__slug="alpha").count() == len(members) - 1


def test_unpaired_surrogates_are_refused_too():
    """A server decodes broken UTF-8 with replacement characters, so these reach a view only from code that
    builds a request itself; the guard refuses them all the same."""
    answered = unstorable_request_middleware(lambda request: pytest.fail("the view ran"))
    request = RequestFactory().get("/api/v1/projects/alpha/members/")
    request.path = "/api/v1/projects/alpha/members/\ud800/"
    assert answered(request).status_code == 404
    request = RequestFactory().get("/api/v1/projects/alpha/members/", {"q": "x"})
    request.GET = request.GET.copy()
    request.GET["q"] = "\udfff"
    assert answered(request).status_code == 400


def test_ordinary_requests_pass(members):
    client = api_client_for(members["admin"])
    assert client.get("/api/v1/projects/alpha/members/?x=%2500").status_code == 200  # a literal "%00" is no NUL
    assert client.patch("/api/v1/projects/alpha/members/nobody/", {"role": "curator"}, format="json").status_code == 404


def test_a_nul_in_a_page_form_field_is_a_400(client, members):
    """Page forms are not parsed by the API's strict parsers: the guard refuses a URL-encoded form before any
    view runs; a multipart one (an import page's, parsed only once the caller may import) reaches its view,
    whose input serializer refuses it as the API's parser does, naming the field."""
    client = logged_in(client, members, "admin")
    encoded = "application/x-www-form-urlencoded"
    add = "/projects/alpha/members/add"
    assert client.post(add, "username=out%00sider&role=curator", content_type=encoded).status_code == 400
    assert client.post(add, "username%00=outsider", content_type=encoded).status_code == 400
    response = client.post(add, {"username": "out\x00sider", "role": "curator"})  # multipart
    assert response.status_code == 400
    assert "username: contains a NUL character, which cannot be stored" in response.content.decode()
    assert Membership.objects.filter(project__slug="alpha").count() == len(members) - 1
    response = Client().post("/accounts/login/", "username=ad%00min&password=x", content_type=encoded)
    assert response.status_code == 400
    # A form with no NUL reaches its view as before.
    response = client.post(add, "username=outsider&role=curator", content_type=encoded)
    assert response.status_code in (200, 302)
    assert Membership.objects.filter(project__slug="alpha").count() == len(members)


def test_the_lookups_refuse_a_nul_themselves():
    """Defence in depth for callers that do not come through a request (a command, a job)."""
    with pytest.raises(PlatformError) as refused:
        account_services.add_member(project=Project.objects.create(slug="gamma", name="Gamma"), username="a\x00b",
                                    role="curator")
    assert refused.value.status in (400, 404)
