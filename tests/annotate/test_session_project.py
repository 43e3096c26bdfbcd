"""A session keeps its item's project (annotate 0011/0012), which the review page and the metrics' latest sessions
read by the (project, status, -id) index: an opened session has it, another project's sessions never show, and the
migration gives the sessions that existed before it their item's project."""

from importlib import import_module

import pytest
from django.apps import apps
from django.urls import reverse

from annotate import selectors, services
from annotate.models import Item, Session, SessionStatus
from dataplatform.accounts.models import Role

from ..factories import MembershipFactory
from .conftest import fake_rollout

pytestmark = pytest.mark.django_db


def accepted_session(project, annotator):
    session = services.open_session(claim=services.claim_next(project=project, annotator=annotator))
    return services.finish(session=session, version=session.version, actor=annotator, accept=True)


@pytest.fixture
def two_projects(project, other_project, members, chars):
    """An accepted session in each project, by the same annotator (a member of both)."""
    MembershipFactory(project=other_project, user=members["annotator"], role=Role.ANNOTATOR)
    for where in (project, other_project):
        Item.objects.create(project=where, messages=[{"role": "user", "content": "q"}], source_sha256="0" * 64,
                            prompt_ids=[1, 2, 3], rollout=fake_rollout([10, 11, 12]))
    return {name: accepted_session(where, members["annotator"])
            for name, where in (("ours", project), ("theirs", other_project))}


def test_an_opened_session_has_its_items_project(two_projects, project, other_project):
    assert [(session.project_id, session.item.project_id) for session in two_projects.values()] == [
        (project.pk, project.pk), (other_project.pk, other_project.pk)]


def test_the_review_page_lists_the_projects_own_sessions_only(client, two_projects, project, members):
    assert list(selectors.sessions_to_review(project).values_list("pk", flat=True)) == [two_projects["ours"].pk]
    client.force_login(members["curator"])
    page = client.get(reverse("annotate-review", args=[project.slug])).content.decode()
    assert f'id="comment-{two_projects["ours"].pk}"' in page
    assert f'id="comment-{two_projects["theirs"].pk}"' not in page


def test_the_migration_gives_each_session_its_items_project(two_projects, project, other_project):
    Session.objects.update(project=other_project)  # as wrong as a column the migration has just added
    import_module("annotate.migrations.0011_session_project").copy_the_items_project(apps, None)
    assert dict(Session.objects.values_list("pk", "project_id")) == {
        two_projects["ours"].pk: project.pk, two_projects["theirs"].pk: other_project.pk}
    assert Session.objects.filter(status=SessionStatus.ACCEPTED).count() == 2
