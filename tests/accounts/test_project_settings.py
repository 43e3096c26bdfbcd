"""A project's settings (trainers_create_exports): any member reads them over the API, its admins change them
over the API (PATCH) and on the project page, with an audit row; one input serializer (ProjectSettingsSerializer)
for both, which refuses a setting that is not one rather than answer having changed nothing."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from dataplatform.audit.models import AuditEvent
from tests.conftest import api_client_for

from ..input_parity import assert_refused_alike
from ..page_roles import VISITORS, logged_in

pytestmark = pytest.mark.django_db
URL = "/api/v1/projects/alpha/settings/"
# who: (API GET, API PATCH, page POST); anonymous: 401 on the API, the log-in page for the page.
EXPECTED = {"admin": (200, 200, 302), "curator": (200, 403, 403), "annotator": (200, 403, 403),
            "trainer": (200, 403, 403), "outsider": (404, 404, 404), "anonymous": (401, 401, 302)}


@pytest.mark.parametrize("who", VISITORS)
def test_who_reads_and_who_changes_the_settings(client, members, project, who):
    api = APIClient() if who == "anonymous" else api_client_for(members[who])
    get, patch, post = EXPECTED[who]
    assert api.get(URL).status_code == get
    assert api.patch(URL, {"trainers_create_exports": True}, format="json").status_code == patch
    page = logged_in(client, members, who).post(reverse("project-settings", args=["alpha"]),
                                                {"trainers_create_exports": "1"})
    assert page.status_code == post
    if who == "anonymous":
        assert page["Location"].startswith("/accounts/login/")
    project.refresh_from_db()
    assert project.trainers_create_exports is (who == "admin")


def test_an_admin_turns_it_on_and_off_with_an_audit_row_each(client, members, project):
    api = api_client_for(members["admin"])
    assert api.get(URL).json() == {"trainers_create_exports": False}
    assert api.patch(URL, {"trainers_create_exports": True}, format="json").json() == {"trainers_create_exports": True}
    assert api.patch(URL, {}, format="json").json() == {"trainers_create_exports": True}  # partial: nothing changes
    listed = api_client_for(members["trainer"]).get("/api/v1/projects/").json()
    assert [(p["slug"], p["trainers_create_exports"]) for p in listed] == [("alpha", True)]
    client.force_login(members["admin"])
    page = client.post(reverse("project-settings", args=["alpha"]), {})  # the box left unticked: off
    assert page.status_code == 302
    project.refresh_from_db()
    assert project.trainers_create_exports is False
    changes = [event.detail["settings"] for event in AuditEvent.objects.filter(action="project.updated")
               .order_by("id")]
    assert changes == [{"trainers_create_exports": [False, True]}, {"trainers_create_exports": [True, False]}]


def test_a_setting_that_is_not_one_is_refused_alike(client, members, project):
    api = api_client_for(members["admin"]).patch(URL, {"trainers_create_export": "1"}, format="multipart")
    client.force_login(members["admin"])
    page = client.post(reverse("project-settings", args=["alpha"]), {"trainers_create_export": "1"})
    assert_refused_alike(api, page, "trainers_create_export",
                         "Not a project setting; the settings: trainers_create_exports.", page_status=400)
    project.refresh_from_db()
    assert project.trainers_create_exports is False and not AuditEvent.objects.filter(action="project.updated")


def test_the_project_page_shows_the_setting_to_members_and_the_form_to_admins(client, members, project):
    admin = logged_in(client, members, "admin").get(reverse("project-detail", args=["alpha"])).content.decode()
    assert 'id="settings-form"' in admin and 'name="trainers_create_exports"' in admin
    client.logout()
    trainer = logged_in(client, members, "trainer").get(reverse("project-detail", args=["alpha"])).content.decode()
    assert 'id="settings-form"' not in trainer and "Curators and admins create exports; trainers pull them." in trainer
