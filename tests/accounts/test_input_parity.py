"""One input layer (dataplatform/accounts/inputs.py): adding a member, changing a role and making a token read one
serializer each from the API and from the page, so the same bad input gets the same refusal from both, on the same
field with the same message (the service's refusals too), and good input goes through both. Creating a project
and setting its license have only a page: it shows what their serializers (using the services' checks) say."""

import pytest
from django.urls import reverse

from dataplatform.accounts.inputs import ProjectCreateSerializer, ProjectLicenseSerializer
from dataplatform.accounts.models import ApiToken, Membership, Project
from dataplatform.inputs import InvalidInput, read
from tests.conftest import api_client_for
from tests.factories import UserFactory

from ..input_parity import assert_refused_alike, page_says, shown

pytestmark = pytest.mark.django_db
ROLES = "admin, curator, annotator, trainer"
NAME_IT = "Give the token a name, e.g. the machine or trainer it is for."
LIFETIME = "Choose when the token expires: in 1 to 3650 days, or never."


def memberships():
    return sorted(Membership.objects.values_list("project__slug", "user__username", "role"))


MEMBER_REFUSALS = [
    ({"username": "outsider", "role": "boss"}, "role", f"'boss' is not a role; the roles are {ROLES}.", 400),
    ({"username": "outsider"}, "role", "This field is required.", 400),
    ({"role": "trainer"}, "username", "This field is required.", 400),
    ({"username": "u" * 151, "role": "trainer"}, "username", "Ensure this field has no more than 150 characters.", 400),
    ({"username": "ghost", "role": "trainer"}, "username", "No user named 'ghost'.", 400),  # the service's
    ({"username": "curator", "role": "trainer"}, "detail", "curator is already a member of alpha (as curator); "
     "change their role instead.", 409),
]


@pytest.mark.parametrize("encoding", ["multipart", "json"])
@pytest.mark.parametrize("data, field, message, status", MEMBER_REFUSALS, ids=[f"{case[1]}-{n}" for n, case in
                                                                               enumerate(MEMBER_REFUSALS)])
def test_adding_a_member_is_refused_alike(client, members, data, field, message, status, encoding):
    before = memberships()
    api = api_client_for(members["admin"]).post("/api/v1/projects/alpha/members/", data, format=encoding)
    client.force_login(members["admin"])
    page = client.post(reverse("project-member-add", args=["alpha"]), data)
    assert_refused_alike(api, page, field, message, status=status, page_status=status)
    assert memberships() == before


@pytest.mark.parametrize("data, field, message", [
    ({"role": "boss"}, "role", f"'boss' is not a role; the roles are {ROLES}."),
    ({}, "role", "This field is required."),
    ({"role": "trainer"}, "detail", None),  # the service's: the project keeps an admin
])
def test_changing_a_role_is_refused_alike(client, members, data, field, message):
    before = memberships()
    api = api_client_for(members["admin"]).patch("/api/v1/projects/alpha/members/admin/", data, format="json")
    client.force_login(members["admin"])
    page = client.post(reverse("project-member-role", args=["alpha", "admin"]), data)
    assert_refused_alike(api, page, field, message, page_status=400)
    assert memberships() == before


TOKEN_REFUSALS = [
    ({}, "name", NAME_IT),
    ({"name": " "}, "name", NAME_IT),
    ({"name": "n" * 101}, "name", "Ensure this field has no more than 100 characters."),
    ({"name": "ci", "expires_in_days": "9999"}, "expires_in_days", LIFETIME),
    ({"name": "ci", "expires_in_days": "0"}, "expires_in_days", LIFETIME),
    ({"name": "ci", "expires_in_days": "soon"}, "expires_in_days", LIFETIME),
    ({"name": "ci", "projects": ["beta"]}, "projects", "Not a project of yours: beta"),
    ({"name": "ci", "read_only": "maybe"}, "read_only", "Must be a valid boolean."),
]


@pytest.mark.parametrize("encoding", ["multipart", "json"])
@pytest.mark.parametrize("data, field, message", TOKEN_REFUSALS, ids=[f"{case[1]}-{n}" for n, case in
                                                                     enumerate(TOKEN_REFUSALS)])
def test_making_a_token_is_refused_alike(client, members, other_project, data, field, message, encoding):
    api_client = api_client_for(members["trainer"])  # a token of its own, made before
    api = api_client.post("/api/v1/tokens/", data, format=encoding)
    client.force_login(members["trainer"])
    page = client.post(reverse("token-list"), data)
    assert_refused_alike(api, page, field, message, page_status=400)
    assert ApiToken.objects.filter(user=members["trainer"]).count() == 1
    assert 'id="new-secret"' not in page.content.decode()


def test_good_input_goes_through_both(client, members):
    UserFactory(username="newcomer")
    api = api_client_for(members["admin"])
    client.force_login(members["admin"])
    assert api.post("/api/v1/projects/alpha/members/", {"username": " outsider ", "role": "trainer"},
                    format="json").status_code == 201
    assert client.post(reverse("project-member-add", args=["alpha"]), {"username": " newcomer ",
                                                                       "role": "trainer"}).status_code == 302
    assert api.patch("/api/v1/projects/alpha/members/outsider/", {"role": "curator"}, format="json").status_code == 200
    assert client.post(reverse("project-member-role", args=["alpha", "newcomer"]), {"role": "curator"}).status_code == 302
    assert {(user, role) for _, user, role in memberships()} >= {("outsider", "curator"), ("newcomer", "curator")}
    for days, form_value in [(30, "30"), (None, "never"), (None, "")]:
        made = api.post("/api/v1/tokens/", {"name": "a", "projects": ["alpha"], "read_only": True,
                                            "expires_in_days": days}, format="json")
        assert made.status_code == 201 and (made.json()["expires_at"] is None) == (days is None)
        page = client.post(reverse("token-list"), {"name": "p", "projects": ["alpha"], "read_only": "1",
                                                   "expires_in_days": form_value})
        assert page.status_code == 200 and 'id="new-secret"' in page.content.decode()
    tokens = ApiToken.objects.filter(user=members["admin"], name__in=["a", "p"]).order_by("id")
    assert [(t.name, t.read_only, [p.slug for p in t.projects.all()], t.expires_at is None) for t in tokens] == [
        (name, True, ["alpha"], never) for never in (False, True, True) for name in ("a", "p")]


@pytest.mark.parametrize("form", [
    {"slug": "no spaces", "name": "X"}, {"slug": "ok", "name": "  "}, {"slug": "ok"},
    {"slug": "ok", "name": "X", "license": "<b>cc</b>"}, {"slug": "ok", "name": "n" * 201},
])
def test_the_project_form_shows_what_its_serializer_says(client, project, form):
    client.force_login(UserFactory(is_superuser=True, is_staff=True))
    with pytest.raises(InvalidInput) as refused:
        read(ProjectCreateSerializer, form)
    [(field, [message])] = refused.value.body().items()
    page = client.post(reverse("project-create"), form)
    assert page.status_code == 400 and shown(field, message) in page_says(page)
    assert Project.objects.count() == 1


def test_the_license_form_shows_what_its_serializer_says(client, members, project):
    with pytest.raises(InvalidInput) as refused:
        read(ProjectLicenseSerializer, {"license": "cc by"})
    [(field, [message])] = refused.value.body().items()
    client.force_login(members["admin"])
    page = client.post(reverse("project-license", args=["alpha"]), {"license": "cc by"})
    assert page.status_code == 400 and shown(field, message) in page_says(page)
    assert read(ProjectLicenseSerializer, {"license": " MIT "}) == {"license": "mit"}
