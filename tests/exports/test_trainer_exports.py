"""Trainer self-service: where the project lets them (Project.trainers_create_exports), trainers create exports
over the API and on the export page, with the audit row a curator's gets; off, the default, they are refused and
the page says who creates exports. Every other role keeps its answer either way (the role matrix checks them with
the setting off)."""

import pytest
from django.urls import reverse

from dataplatform.audit.models import AuditEvent
from dataplatform.exports.models import Export
from tests.conftest import api_client_for

from ..page_roles import logged_in

pytestmark = pytest.mark.django_db
BASE = "/api/v1/projects/alpha/exports/"
BODY = {"kind": "test.synthetic", "filters": {"n": 3}}
PAGE_FORM = {"kind": "test.synthetic", "filters": "n=3", "format": "parquet"}
# (who, API create, page create, API delete) with trainers allowed; outsiders do not see the project. An admin may
# delete, but not an export still queued (409): access is decided before that.
ALLOWED = [("admin", 202, 302, 409), ("curator", 202, 302, 403), ("trainer", 202, 302, 403),
           ("annotator", 403, 403, 403), ("outsider", 404, 404, 404)]


@pytest.fixture
def trainers_create(project):
    project.trainers_create_exports = True
    project.save(update_fields=["trainers_create_exports"])
    return project


@pytest.mark.parametrize("who, api_status, page_status, delete_status", ALLOWED, ids=[row[0] for row in ALLOWED])
def test_with_the_setting_on_trainers_create_exports_as_curators_do(client, members, trainers_create, who, api_status,
                                                                    page_status, delete_status,
                                                                    django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        api = api_client_for(members[who])
        assert api.post(BASE, BODY, format="json").status_code == api_status
        page = logged_in(client, members, who).post(reverse("export-create", args=["alpha"]), PAGE_FORM)
        assert page.status_code == page_status
    made = Export.objects.filter(created_by=members[who])
    assert made.count() == (2 if api_status == 202 else 0)
    audited = AuditEvent.objects.filter(action="export.created", actor=members[who], project=trainers_create)
    assert audited.count() == made.count()
    if made:
        assert api.delete(f"{BASE}{made.first().pk}/").status_code == delete_status


def test_a_read_only_token_still_cannot_create(members, trainers_create):
    response = api_client_for(members["trainer"], read_only=True).post(BASE, BODY, format="json")
    assert response.status_code == 403 and not Export.objects.exists()


def test_with_the_setting_off_a_trainer_is_refused_and_the_page_says_who_creates(client, members, project):
    response = api_client_for(members["trainer"]).post(BASE, BODY, format="json")
    assert response.status_code == 403
    assert response.json()["detail"] == ("Your role (trainer) cannot create exports in project alpha: its admins and "
                                         "curators can, and its trainers once an admin lets them.")
    page = logged_in(client, members, "trainer").get(reverse("export-list", args=["alpha"]))
    html = page.content.decode()
    assert 'id="new-export"' not in html and 'id="who-creates-exports"' in html
    assert "created by its curators and admins: admin, curator." in html
    assert not Export.objects.exists()


def test_with_the_setting_on_the_trainer_gets_the_form(client, members, trainers_create):
    html = logged_in(client, members, "trainer").get(reverse("export-list", args=["alpha"])).content.decode()
    assert 'id="new-export"' in html and 'id="who-creates-exports"' not in html
