import pytest
from django.core.exceptions import PermissionDenied
from django.http import Http404

from dataplatform.accounts import services
from dataplatform.accounts.models import Role
from dataplatform.accounts.permissions import (
    CAN_RUN_JOBS,
    project_for,
    require_role,
    role_in,
    visible_projects,
)
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_role_in_reports_each_membership_role(project, members):
    for role in Role:
        assert role_in(members[role.value], project) == role
    assert role_in(members["outsider"], project) is None


def test_superuser_is_admin_everywhere(project):
    boss = UserFactory(username="boss", is_superuser=True)
    assert role_in(boss, project) == Role.ADMIN
    assert project in visible_projects(boss)


def test_inactive_user_sees_nothing(project, members):
    user = members["admin"]
    user.is_active = False
    user.save()
    assert role_in(user, project) is None
    assert not visible_projects(user).exists()


def test_visible_projects_filters_by_role(project, other_project, members):
    MembershipFactory(project=other_project, user=members["annotator"], role=Role.CURATOR)
    assert set(visible_projects(members["annotator"])) == {project, other_project}
    assert set(visible_projects(members["annotator"], roles=CAN_RUN_JOBS)) == {other_project}


def test_cross_project_access_is_a_404_not_a_403(project, other_project, members):
    """A member of alpha asking for beta must not even learn that beta exists."""
    with pytest.raises(Http404):
        project_for(members["admin"], other_project.slug, {Role.ADMIN})
    with pytest.raises(Http404):
        require_role(members["admin"], other_project, {Role.ADMIN})


def test_wrong_role_in_own_project_is_denied(project, members):
    with pytest.raises(PermissionDenied):
        project_for(members["trainer"], project.slug, CAN_RUN_JOBS)
    assert project_for(members["curator"], project.slug, CAN_RUN_JOBS) == (project, Role.CURATOR)


def test_token_limited_to_one_project_hides_the_others(project, other_project, members):
    user = members["admin"]
    MembershipFactory(project=other_project, user=user, role=Role.ADMIN)
    token, _ = services.issue_token(user=user, name="narrow", projects=[project])
    assert set(visible_projects(user)) == {project, other_project}
    assert set(visible_projects(user, token=token)) == {project}
    with pytest.raises(Http404):
        project_for(user, other_project.slug, {Role.ADMIN}, token=token)
