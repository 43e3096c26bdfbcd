"""Members of a project (add, change role, remove) and its license: the services and the commands."""

import io
import threading
import time

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from dataplatform.accounts import services
from dataplatform.accounts.models import Membership, Project, Role
from dataplatform.audit.models import Action, AuditEvent
from dataplatform.errors import Conflict, Missing, Refused
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def role_of(project, username: str) -> str | None:
    return Membership.objects.filter(project=project, user__username=username).values_list("role", flat=True).first()


# --- services --------------------------------------------------------------------------------------------------

def test_add_change_and_remove_each_write_their_audit_row(project, members):
    newcomer, boss = UserFactory(username="newcomer"), members["admin"]
    membership = services.add_member(project=project, username="newcomer", role="annotator", actor=boss,
                                     client_ip="192.0.2.7")
    assert (membership.user, membership.role) == (newcomer, Role.ANNOTATOR)
    services.change_member_role(project=project, user=newcomer, role=Role.CURATOR, actor=boss)
    assert role_of(project, "newcomer") == "curator"
    services.remove_member(project=project, username="newcomer", actor=boss)
    assert role_of(project, "newcomer") is None

    events = list(AuditEvent.objects.filter(project=project).order_by("id"))
    assert [e.action for e in events] == [Action.MEMBERSHIP_ADDED, Action.MEMBERSHIP_ROLE_CHANGED,
                                          Action.MEMBERSHIP_REMOVED]
    added, changed, removed = events
    assert added.detail == {"user": "newcomer", "role": "annotator"} and added.client_ip == "192.0.2.7"
    assert changed.detail == {"user": "newcomer", "role": "curator", "previous_role": "annotator"}
    assert removed.detail == {"user": "newcomer", "role": "curator"}
    assert {e.actor_name for e in events} == {"admin"}
    assert (removed.target_type, removed.target_id) == ("accounts.membership", str(membership.pk))


def test_giving_the_same_role_again_changes_nothing_and_records_nothing(project, members):
    services.change_member_role(project=project, username="curator", role="curator", actor=members["admin"])
    assert not AuditEvent.objects.filter(action=Action.MEMBERSHIP_ROLE_CHANGED).exists()


def test_an_unknown_username_is_refused_by_name(project, members):
    for call in (lambda: services.add_member(project=project, username="ghost", role="annotator"),
                 lambda: services.change_member_role(project=project, username="ghost", role="annotator"),
                 lambda: services.remove_member(project=project, username="ghost")):
        with pytest.raises(Refused, match="No user named 'ghost'") as refused:
            call()
        assert refused.value.field == "username" and refused.value.status == 400
    assert not AuditEvent.objects.exists()


def test_adding_a_member_again_is_a_conflict(project, members):
    with pytest.raises(Conflict, match=r"curator is already a member of alpha \(as curator\)"):
        services.add_member(project=project, username="curator", role="admin")
    assert role_of(project, "curator") == "curator"


def test_changing_or_removing_someone_who_is_not_a_member_is_refused(project, members):
    with pytest.raises(Missing, match="outsider is not a member of alpha"):
        services.change_member_role(project=project, username="outsider", role="curator")
    with pytest.raises(Missing, match="outsider is not a member of alpha"):
        services.remove_member(project=project, username="outsider")
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize("role", ["boss", "", "Admin", None])
def test_an_invalid_role_is_refused_naming_the_valid_ones(project, members, role):
    for call in (lambda: services.add_member(project=project, username="outsider", role=role),
                 lambda: services.change_member_role(project=project, username="curator", role=role)):
        with pytest.raises(Refused, match="the roles are admin, curator, annotator, trainer") as refused:
            call()
        assert refused.value.field == "role"
    assert role_of(project, "outsider") is None and role_of(project, "curator") == "curator"


def test_the_last_admin_can_be_neither_demoted_nor_removed(project, members):
    with pytest.raises(Refused, match="admin is the last admin of alpha"):
        services.change_member_role(project=project, username="admin", role="curator")
    with pytest.raises(Refused, match="admin is the last admin of alpha"):
        services.remove_member(project=project, username="admin")
    assert role_of(project, "admin") == "admin"
    assert not AuditEvent.objects.exists()


def test_with_a_second_admin_either_may_go(project, members):
    services.change_member_role(project=project, username="curator", role="admin")
    services.change_member_role(project=project, username="admin", role="trainer")
    with pytest.raises(Refused, match="curator is the last admin"):
        services.remove_member(project=project, username="curator")
    services.change_member_role(project=project, username="trainer", role="admin")
    services.remove_member(project=project, username="curator")
    assert set(Membership.objects.filter(project=project, role="admin").values_list("user__username", flat=True)) \
        == {"trainer"}


def test_an_admin_of_another_project_does_not_count(project, other_project, members):
    services.add_member(project=other_project, username="curator", role="admin")
    with pytest.raises(Refused, match="last admin"):
        services.remove_member(project=project, username="admin")


@pytest.mark.integration  # real concurrent transactions: row locks on PostgreSQL, SQLite's one write lock
@pytest.mark.django_db(transaction=True)
def test_two_admins_taking_each_other_out_at_once_leave_one_admin(project, members, monkeypatch):
    services.change_member_role(project=project, username="curator", role="admin")
    check = services._keep_an_admin

    def check_then_dawdle(*args):
        check(*args)
        time.sleep(0.1)  # between the check and the write: without the lock both checks would pass

    monkeypatch.setattr(services, "_keep_an_admin", check_then_dawdle)
    barrier, done, refused, errors = threading.Barrier(2), [], [], []

    def run(change):
        try:
            barrier.wait()
            change()
            done.append(1)
        except Refused as exc:
            refused.append(str(exc))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=[change]) for change in (
        lambda: services.change_member_role(project=project, username="admin", role="trainer"),
        lambda: services.remove_member(project=project, username="curator"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(done) == len(refused) == 1 and "last admin" in refused[0]
    assert Membership.objects.filter(project=project, role="admin").count() == 1


@pytest.mark.parametrize("typed, stored", [("cc-by-4.0", "cc-by-4.0"), (" Apache-2.0 ", "apache-2.0"),
                                           ("other", "other"), ("GPL-2.0+", "gpl-2.0+"), ("", "")])
def test_the_license_is_stored_as_a_lowercase_id(project, members, typed, stored):
    Project.objects.filter(pk=project.pk).update(license="mit")
    project.refresh_from_db()
    services.set_project_license(project=project, license=typed, actor=members["admin"])
    project.refresh_from_db()
    assert project.license == stored
    event = AuditEvent.objects.get(action=Action.PROJECT_UPDATED)
    assert event.detail == {"license": stored, "previous_license": "mit"} and event.actor_name == "admin"


@pytest.mark.parametrize("typed", ["cc by 4.0", "-mit", "x" * 65, "<script>", "mit/apache"])
def test_a_license_that_is_not_an_id_is_refused(project, typed):
    with pytest.raises(Refused, match="is not a license id") as refused:
        services.set_project_license(project=project, license=typed)
    assert refused.value.field == "license"
    project.refresh_from_db()
    assert project.license == "" and not AuditEvent.objects.exists()


def test_the_same_license_again_records_nothing(project):
    services.set_project_license(project=project, license="mit")
    services.set_project_license(project=project, license="MIT")
    assert AuditEvent.objects.filter(action=Action.PROJECT_UPDATED).count() == 1


# --- manage.py members and createproject --license -----------------------------------------------------------------

def members_command(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("members", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_members_command_lists_adds_changes_and_removes(project, members):
    UserFactory(username="dana")
    assert "Added dana to alpha as trainer." in members_command("alpha", "--add", "dana", "--role", "trainer")[0]
    assert "dana is now curator of alpha." in members_command("alpha", "--set-role", "dana", "--role", "curator")[0]
    listed = members_command("alpha", "--list")[0].splitlines()
    assert "dana curator" in listed and "admin admin" in listed and len(listed) == 5
    assert "Removed dana from alpha." in members_command("alpha", "--remove", "dana")[0]
    assert role_of(project, "dana") is None
    # the command acts as nobody: the audit rows have no actor
    assert list(AuditEvent.objects.filter(project=project).values_list("actor_name", flat=True)) == ["", "", ""]


def test_members_command_lists_an_empty_project(other_project):
    out, err = members_command("beta", "--list")
    assert out == "" and "beta has no members" in err


@pytest.mark.parametrize("args, message", [
    (["nope", "--list"], "No project with slug 'nope'"),
    (["alpha", "--add", "ghost", "--role", "annotator"], "No user named 'ghost'"),
    (["alpha", "--add", "curator", "--role", "annotator"], "curator is already a member of alpha"),
    (["alpha", "--add", "outsider", "--role", "boss"], "the roles are admin, curator, annotator, trainer"),
    (["alpha", "--add", "outsider"], "--add needs --role"),
    (["alpha", "--set-role", "curator"], "--set-role needs --role"),
    (["alpha", "--list", "--role", "admin"], "--role goes with --add or --set-role"),
    (["alpha", "--set-role", "outsider", "--role", "curator"], "outsider is not a member of alpha"),
    (["alpha", "--set-role", "admin", "--role", "curator"], "admin is the last admin of alpha"),
    (["alpha", "--remove", "admin"], "admin is the last admin of alpha"),
    (["alpha", "--remove", "outsider"], "outsider is not a member of alpha"),
])
def test_members_command_refusals_are_command_errors(project, members, args, message):
    with pytest.raises(CommandError, match=message):
        members_command(*args)
    assert not AuditEvent.objects.exists()


def test_members_command_needs_exactly_one_action(project):
    with pytest.raises(CommandError):
        members_command("alpha")
    with pytest.raises(CommandError):
        members_command("alpha", "--list", "--remove", "admin")


def test_createproject_sets_the_license():
    call_command("createproject", "gamma", "Gamma", "--license", "CC-BY-4.0", stdout=io.StringIO())
    project = Project.objects.get(slug="gamma")
    assert project.license == "cc-by-4.0"
    assert AuditEvent.objects.get(action=Action.PROJECT_CREATED, project=project).detail["license"] == "cc-by-4.0"


def test_createproject_refuses_a_license_that_is_not_an_id_and_writes_nothing():
    with pytest.raises(CommandError, match="--license: 'cc by' is not a license id"):
        call_command("createproject", "gamma", "Gamma", "--license", "cc by", stdout=io.StringIO())
    assert not Project.objects.filter(slug="gamma").exists()
