"""The project page's Members and License sections: what each role sees, and the admins' forms."""

import pytest
from django.test import Client
from django.urls import reverse

from dataplatform.accounts.models import Membership, Project, Role
from dataplatform.audit.models import Action, AuditEvent
from tests.factories import MembershipFactory, UserFactory
from tests.page_roles import logged_in

pytestmark = pytest.mark.django_db

PAGE = reverse("project-detail", args=["alpha"])


def role_of(username: str) -> str | None:
    return (Membership.objects.filter(project__slug="alpha", user__username=username)
            .values_list("role", flat=True).first())


def as_admin(client, members):
    return logged_in(client, members, "admin")


@pytest.mark.parametrize("who, manages", [("admin", True), ("curator", False), ("annotator", False),
                                          ("trainer", False)])
def test_every_member_sees_the_members_and_the_license_and_only_admins_the_forms(client, members, who, manages):
    Project.objects.filter(slug="alpha").update(license="cc-by-4.0")
    html = logged_in(client, members, who).get(PAGE).content.decode()
    assert 'id="members-title"' in html and '">trainer</td>' in html
    assert "<code>cc-by-4.0</code>" in html
    for form in ('id="member-add-form"', 'id="license-form"', reverse("project-member-role", args=["alpha", "trainer"]),
                 reverse("project-member-remove", args=["alpha", "trainer"])):
        assert (form in html) == manages, form


def test_a_superuser_manages_any_project(client, members):
    client.force_login(UserFactory(username="root", is_superuser=True, is_staff=True))
    assert 'id="member-add-form"' in client.get(PAGE).content.decode()


def test_no_license_says_so(client, members):
    assert "Not stated." in as_admin(client, members).get(PAGE).content.decode()


# --- who may post -----------------------------------------------------------------------------------------------

FORMS = [
    ("project-member-add", ["alpha"], {"username": "outsider", "role": "trainer"}),
    ("project-member-role", ["alpha", "trainer"], {"role": "curator"}),
    ("project-member-remove", ["alpha", "trainer"], {}),
    ("project-license", ["alpha"], {"license": "mit"}),
]


@pytest.mark.parametrize("who, status", [("curator", 403), ("annotator", 403), ("trainer", 403), ("outsider", 404)])
@pytest.mark.parametrize("name, args, data", FORMS, ids=[name for name, _, _ in FORMS])
def test_only_admins_may_post(client, members, who, status, name, args, data):
    response = logged_in(client, members, who).post(reverse(name, args=args), data)
    assert response.status_code == status
    assert not AuditEvent.objects.exists()
    assert role_of("trainer") == "trainer" and role_of("outsider") is None


@pytest.mark.parametrize("name, args, data", FORMS, ids=[name for name, _, _ in FORMS])
def test_posting_needs_a_log_in_and_the_csrf_token(members, name, args, data):
    url = reverse(name, args=args)
    anonymous = Client().post(url, data)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(members["admin"])
    assert browser.post(url, data).status_code == 403
    assert not AuditEvent.objects.exists()


# --- the admin's forms --------------------------------------------------------------------------------------------

def test_add_a_member(client, members):
    response = as_admin(client, members).post(reverse("project-member-add", args=["alpha"]),
                                              {"username": " outsider ", "role": "trainer"}, follow=True)
    assert response.redirect_chain == [(PAGE, 302)]
    assert "Added outsider as trainer." in response.content.decode()
    assert role_of("outsider") == "trainer"
    assert AuditEvent.objects.get(action=Action.MEMBERSHIP_ADDED).actor == members["admin"]


@pytest.mark.parametrize("data, status, error", [
    ({"username": "ghost", "role": "trainer"}, 400, "No user named &#x27;ghost&#x27;."),
    ({"username": "curator", "role": "trainer"}, 409, "curator is already a member of alpha (as curator)"),
    ({"username": "outsider", "role": "boss"}, 400, "the roles are admin, curator, annotator, trainer"),
])
def test_a_refused_add_shows_the_error_beside_the_form_and_keeps_what_was_typed(client, members, data, status, error):
    response = as_admin(client, members).post(reverse("project-member-add", args=["alpha"]), data)
    assert response.status_code == status
    html = response.content.decode()
    assert 'id="member-add-error"' in html and error in html
    assert f'id="id_member_username" value="{data["username"]}"' in html
    assert role_of("outsider") is None and role_of("curator") == "curator"


def test_change_a_role(client, members):
    response = as_admin(client, members).post(reverse("project-member-role", args=["alpha", "annotator"]),
                                              {"role": "curator"}, follow=True)
    assert response.redirect_chain == [(PAGE, 302)] and "annotator is now curator." in response.content.decode()
    assert role_of("annotator") == "curator"


def test_the_last_admin_s_refusal_is_shown_in_their_row(client, members):
    admin = as_admin(client, members)
    demoted = admin.post(reverse("project-member-role", args=["alpha", "admin"]), {"role": "trainer"})
    removed = admin.post(reverse("project-member-remove", args=["alpha", "admin"]))
    for response in (demoted, removed):
        assert response.status_code == 400
        assert 'class="field-error" role="alert">admin is the last admin of alpha' in response.content.decode()
    assert role_of("admin") == "admin"


def test_remove_a_member(client, members):
    response = as_admin(client, members).post(reverse("project-member-remove", args=["alpha", "trainer"]), follow=True)
    assert response.redirect_chain == [(PAGE, 302)] and "Removed trainer from Alpha." in response.content.decode()
    assert role_of("trainer") is None


def test_an_admin_who_removes_themselves_lands_on_the_project_list(client, members):
    MembershipFactory(project=Project.objects.get(slug="alpha"), user=UserFactory(username="deputy"), role=Role.ADMIN)
    response = as_admin(client, members).post(reverse("project-member-remove", args=["alpha", "admin"]))
    assert response.status_code == 302 and response["Location"] == reverse("project-list")
    assert role_of("admin") is None
    assert client.get(PAGE).status_code == 404


def test_a_user_who_is_not_a_member_is_a_404(client, members, other_project):
    MembershipFactory(project=other_project, user=UserFactory(username="carol"), role=Role.CURATOR)
    admin = as_admin(client, members)
    for username in ("outsider", "carol", "ghost"):
        assert admin.post(reverse("project-member-role", args=["alpha", username]), {"role": "admin"}).status_code == 404
        assert admin.post(reverse("project-member-remove", args=["alpha", username])).status_code == 404


def test_the_forms_only_take_posts(client, members):
    assert as_admin(client, members).get(reverse("project-member-add", args=["alpha"])).status_code == 405


def test_usernames_are_escaped(client, members, project):
    MembershipFactory(project=project, user=UserFactory(username="<img src=x onerror=alert(1)>"), role=Role.TRAINER)
    html = as_admin(client, members).get(PAGE).content.decode()
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    refused = client.post(reverse("project-member-add", args=["alpha"]), {"username": "<b>bold</b>", "role": "trainer"})
    assert "<b>bold</b>" not in refused.content.decode() and "&lt;b&gt;bold&lt;/b&gt;" in refused.content.decode()


def test_set_and_clear_the_license(client, members, project):
    admin = as_admin(client, members)
    response = admin.post(reverse("project-license", args=["alpha"]), {"license": "Apache-2.0"}, follow=True)
    assert response.redirect_chain == [(PAGE, 302)] and "License set to apache-2.0." in response.content.decode()
    project.refresh_from_db()
    assert project.license == "apache-2.0"
    assert "License cleared." in admin.post(reverse("project-license", args=["alpha"]), {"license": ""},
                                            follow=True).content.decode()
    project.refresh_from_db()
    assert project.license == ""
    assert AuditEvent.objects.filter(action=Action.PROJECT_UPDATED).count() == 2


def test_a_refused_license_is_shown_beside_its_form(client, members, project):
    response = as_admin(client, members).post(reverse("project-license", args=["alpha"]), {"license": "<cc by>"})
    assert response.status_code == 400
    html = response.content.decode()
    assert 'id="license-error"' in html and "&#x27;&lt;cc by&gt;&#x27; is not a license id" in html
    assert 'value="&lt;cc by&gt;"' in html
    project.refresh_from_db()
    assert project.license == ""


def test_a_member_whose_username_holds_a_slash_can_be_changed_and_removed(client, members, project):
    odd = UserFactory(username="</script>/x?y#z")
    Membership.objects.create(project=project, user=odd, role=Role.ANNOTATOR)
    admin = as_admin(client, members)
    assert admin.get(reverse("project-detail", args=["alpha"])).status_code == 200
    assert admin.post(reverse("project-member-role", args=["alpha", odd.username]), {"role": "curator"}).status_code == 302
    assert Membership.objects.get(user=odd).role == Role.CURATOR
    assert admin.post(reverse("project-member-remove", args=["alpha", odd.username])).status_code == 302
    assert not Membership.objects.filter(user=odd).exists()
