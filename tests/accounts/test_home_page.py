"""The Projects (home) page: its first action of each workflow per role, and creating a project (site admins only,
with its audit row and its first admin)."""

import pytest
from django.urls import reverse

from dataplatform.accounts.models import Membership, Project, Role
from dataplatform.audit.models import Action, AuditEvent
from dataplatform.jobs.models import Job, JobState
from tests.factories import UserFactory
from tests.page_roles import logged_in

pytestmark = pytest.mark.django_db

CREATE = reverse("project-create")
LIST = reverse("project-list")


@pytest.fixture
def root(client):
    user = UserFactory(username="root", is_superuser=True, is_staff=True)
    client.force_login(user)
    return user


def test_a_superuser_creates_a_project_and_becomes_its_admin(client, root):
    assert 'id="project-create-form"' in client.get(LIST).content.decode()
    response = client.post(CREATE, {"slug": "swe-labels", "name": " SWE labels ", "description": "tasks",
                                    "license": "CC-BY-4.0"}, follow=True)
    assert response.redirect_chain[-1][0] == reverse("project-detail", args=["swe-labels"])
    assert "Created SWE labels." in response.content.decode()
    project = Project.objects.get(slug="swe-labels")
    assert (project.name, project.description, project.license) == ("SWE labels", "tasks", "cc-by-4.0")
    assert Membership.objects.get(project=project, user=root).role == Role.ADMIN
    event = AuditEvent.objects.get(action=Action.PROJECT_CREATED, project=project)
    assert event.actor == root and event.detail["slug"] == "swe-labels"


@pytest.mark.parametrize("form, message", [
    ({"slug": "alpha", "name": "Again"}, "A project with the slug &#x27;alpha&#x27; exists already."),
    ({"slug": "no spaces", "name": "X"}, "is not a slug"),
    ({"slug": "ok", "name": "  "}, "A project needs a name"),
    ({"slug": "ok", "name": "X", "license": "<b>cc</b>"}, "is not a license id"),
])
def test_a_refused_form_comes_back_with_its_values_and_the_reason(client, root, project, form, message):
    response = client.post(CREATE, form)
    html = response.content.decode()
    assert response.status_code == 400 and message in html
    assert f'value="{form["name"]}"' in html or not form["name"].strip()
    assert "<b>cc</b>" not in html  # what the user typed is escaped
    assert Project.objects.count() == 1 and not AuditEvent.objects.filter(action=Action.PROJECT_CREATED).exists()


@pytest.mark.parametrize("who", ["admin", "curator", "annotator", "trainer", "outsider"])
def test_only_site_admins_see_the_form_and_may_post(client, members, who):
    logged_in(client, members, who)
    assert 'id="project-create-form"' not in client.get(LIST).content.decode()
    assert client.post(CREATE, {"slug": "mine", "name": "Mine"}).status_code == 403
    assert not Project.objects.filter(slug="mine").exists()


@pytest.mark.parametrize("who, actions", [
    ("admin", ["Correct your first response", "Review a label", "Curate a failure", "Filter near-ties",
               "Pull an export"]),
    ("curator", ["Correct your first response", "Review a label", "Curate a failure", "Filter near-ties",
                 "Pull an export"]),
    ("annotator", ["Correct your first response", "Review a label"]),
    ("trainer", ["Pull an export"]),
])
def test_the_home_page_links_each_workflows_first_action_the_role_allows(client, members, who, actions):
    html = logged_in(client, members, who).get(LIST).content.decode()
    assert 'id="workflows"' in html
    cell = html.split('<td class="first-actions">')[1].split("</td>")[0]
    pages = {"Correct your first response": "annotate-queue", "Review a label": "labeler-overview",
             "Curate a failure": "aed-overview", "Filter near-ties": "atd-overview", "Pull an export": "export-list"}
    assert [label for label in pages if label in cell] == actions
    for label in actions:
        assert f'<a href="{reverse(pages[label], args=["alpha"])}">{label}</a>' in cell


@pytest.mark.parametrize("who", ["admin", "curator", "annotator", "trainer"])
def test_the_home_page_shows_the_demo_filling_in_until_it_is_done(client, project, members, who):
    """`make run`'s demo.seed job: its progress on the home page while it runs, gone once it succeeded; shown to
    those who may open its page and poll its bar, the roles that see jobs (to the others both were 404s)."""
    seed = Job.objects.create(project=project, kind="demo.seed", params={"started_at": 0}, state=JobState.RUNNING,
                              progress_total=5, progress_done=2, created_by=members["admin"])
    client.force_login(members[who])
    page = client.get("/").content.decode()
    opens = [client.get(reverse(name, args=[seed.pk])).status_code for name in ("job-detail", "job-progress")]
    shown = f'id="job-progress-{seed.pk}"' in page and f'href="/jobs/{seed.pk}/"' in page
    assert shown == ("being filled in" in page) == (opens == [200, 200])
    assert shown == (who in ("admin", "curator"))
    Job.objects.filter(pk=seed.pk).update(state=JobState.SUCCEEDED)
    page = client.get("/").content.decode()
    assert f"job-progress-{seed.pk}" not in page and "being filled in" not in page
