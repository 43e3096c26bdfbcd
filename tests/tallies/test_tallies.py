"""Kept figures (dataplatform/tallies): first read counts, `add` keeps them, the recount repairs them, and a change
made while a project's tally is first counted is neither lost nor counted twice."""

import threading

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.db.models import Count

from dataplatform.audit import services as audit
from dataplatform.audit.models import Action, AuditEvent
from dataplatform.tallies import registry, selectors, services
from dataplatform.tallies.models import Tally
from dataplatform.tallies.registry import Figure

pytestmark = pytest.mark.django_db


def _recount(project_id: int) -> dict[str, Figure]:
    rows = AuditEvent.objects.filter(project_id=project_id).values("action").annotate(n=Count("id"))
    return {row["action"]: Figure(row["n"]) for row in rows}


ACTIONS = registry.define("tests.audit_actions", tables=(AuditEvent,), recount=_recount)


def record(project, action=Action.EXPORT_CREATED):
    """An audited change and its `add`, in one transaction, as a service does it."""
    with transaction.atomic():
        audit.record(action=action, project=project)
        services.add(project.pk, ACTIONS, {action: 1})


def test_first_read_counts_then_add_keeps(project, other_project):
    audit.record(action=Action.EXPORT_CREATED, project=project)  # before the tally exists: no `add` at all
    services.add(project.pk, ACTIONS, {Action.EXPORT_CREATED: 1})  # not counted yet: ignored, the count sees it
    audit.record(action=Action.EXPORT_DELETED, project=other_project)
    assert selectors.counts(project.pk, ACTIONS) == {Action.EXPORT_CREATED: 1}
    record(project)
    record(project, Action.EXPORT_DELETED)
    assert selectors.counts(project.pk, ACTIONS) == {Action.EXPORT_CREATED: 2, Action.EXPORT_DELETED: 1}
    assert selectors.counts(project.pk, ACTIONS) == {k: f.count for k, f in _recount(project.pk).items()}
    assert selectors.counts(other_project.pk, ACTIONS) == {Action.EXPORT_DELETED: 1}


def test_totals_and_negative_changes(project):
    selectors.figures(project.pk, ACTIONS)
    services.add(project.pk, ACTIONS, {"x": Figure(2, 1.5), "y": 0})
    services.add(project.pk, ACTIONS, {"x": Figure(-1, -0.5)})
    assert selectors.figures(project.pk, ACTIONS) == {"x": Figure(1, 1.0)}
    assert not Tally.objects.filter(key="y").exists()


def test_a_rolled_back_change_is_not_kept(project):
    selectors.figures(project.pk, ACTIONS)
    with pytest.raises(RuntimeError), transaction.atomic():
        audit.record(action=Action.EXPORT_CREATED, project=project)
        services.add(project.pk, ACTIONS, {Action.EXPORT_CREATED: 1})
        raise RuntimeError("the service failed after its add")
    assert selectors.counts(project.pk, ACTIONS) == {}


def test_recount_command_repairs(project, other_project):
    record(project)
    selectors.figures(project.pk, ACTIONS)
    Tally.objects.filter(project=project).update(count=99)
    call_command("recount_tallies", "--project", project.slug, "--tally", ACTIONS, stdout=open("/dev/null", "w"))
    assert selectors.counts(project.pk, ACTIONS) == {Action.EXPORT_CREATED: 1}
    with pytest.raises(CommandError, match="--tally: no tally named 'nope'"):
        call_command("recount_tallies", "--tally", "nope")
    with pytest.raises(CommandError, match="--project: no project"):
        call_command("recount_tallies", "--project", "nope")


def test_unknown_tally_and_double_definition():
    with pytest.raises(KeyError, match="no tally named 'tests.nope'"):
        services.count_now(1, "tests.nope")
    with pytest.raises(ValueError, match="defined twice"):
        registry.define(ACTIONS, tables=(AuditEvent,), recount=lambda project_id: {})


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres_only("SQLite runs one write transaction at a time: there is no interleaving to test")
def test_a_change_open_during_the_first_count_is_counted_once(project):
    """A writer has written its change and called `add` (ignored: not counted yet) but not committed when a page
    first reads the tally: the count waits for the writer, then sees its change, once."""
    written, release = threading.Event(), threading.Event()

    def writer():
        try:
            with transaction.atomic():
                audit.record(action=Action.EXPORT_CREATED, project=project)
                services.add(project.pk, ACTIONS, {Action.EXPORT_CREATED: 1})
                written.set()
                release.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=writer)
    thread.start()
    assert written.wait(10)
    timer = threading.Timer(0.5, release.set)  # the count below blocks on the writer until it commits
    timer.start()
    try:
        assert selectors.counts(project.pk, ACTIONS) == {Action.EXPORT_CREATED: 1}
        assert release.is_set(), "the first count did not wait for the open writer"
    finally:
        release.set()
        thread.join()
    record(project)
    assert selectors.counts(project.pk, ACTIONS) == {Action.EXPORT_CREATED: 2}
