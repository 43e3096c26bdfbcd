"""A remembered check (exports/stored.py `build`, `StoredCheck`): a build whose selection and stored rows have not
changed since a check found every row in place checks nothing; any change to either makes it check again."""

import pytest
from django.db import connection
from django.db.models import Value
from django.db.models.functions import Concat

from dataplatform.dbfunctions import TextHash
from dataplatform.exports import stored
from dataplatform.exports.models import StoredCheck, StoredRow
from dataplatform.jobs.models import Job

from .stored_kind import DERIVED, STORED_JOBS, query_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs(project):
    DERIVED.clear()
    return [Job.objects.create(project=project, kind=f"k{i}", params={"copies": i % 3}) for i in range(7)]


@pytest.fixture
def checks(monkeypatch):
    """How many times a build walked the sources to check them."""
    walked = []
    walk = stored._derive_missing
    monkeypatch.setattr(stored, "_derive_missing", lambda kind, query: walked.append(1) or walk(kind, query))
    return walked


def built(project) -> int:
    DERIVED.clear()
    return stored.build(STORED_JOBS, query_of(project))


def test_a_build_after_a_complete_check_checks_nothing(project, jobs, checks):
    assert built(project) == len(jobs)
    assert len(checks) == 2  # the walk that derived, then the one that found every row in place
    assert StoredCheck.objects.filter(kind=STORED_JOBS.name, version=1, project=project).count() == 1
    assert built(project) == 0
    assert len(checks) == 2 and DERIVED == []
    assert stored.stored_read_rows(STORED_JOBS, query_of(project)) == stored.live_rows(STORED_JOBS, query_of(project))


def test_a_source_changed_in_place_added_or_deleted_is_checked_again(project, jobs, checks):
    built(project)
    Job.objects.filter(pk=jobs[1].pk).update(progress_done=5)  # its revision
    assert built(project) == 1 and DERIVED == [jobs[1].pk]
    added = Job.objects.create(project=project, kind="k-new")
    assert built(project) == 1 and DERIVED == [added.pk]
    walks = len(checks)
    Job.objects.filter(pk=jobs[2].pk).delete()
    assert built(project) == 0
    assert len(checks) == walks + 1  # checked, found nothing missing, remembered
    assert built(project) == 0 and len(checks) == walks + 1
    assert stored.stored_read_rows(STORED_JOBS, query_of(project)) == stored.live_rows(STORED_JOBS, query_of(project))


def test_a_stored_row_deleted_or_replaced_is_derived_again(project, jobs):
    built(project)
    StoredRow.objects.filter(kind=STORED_JOBS.name, source_id=jobs[0].pk).delete()
    assert built(project) == 1 and DERIVED == [jobs[0].pk]
    # One row gone and another of the kind stored (their count unchanged): the highest id tells.
    StoredRow.objects.filter(kind=STORED_JOBS.name, source_id=jobs[3].pk).delete()
    stored._store(STORED_JOBS, project, {jobs[4].pk: "other"}, {jobs[4].pk: []})
    assert built(project) == 1 and DERIVED == [jobs[3].pk]
    assert stored.stored_read_rows(STORED_JOBS, query_of(project)) == stored.live_rows(STORED_JOBS, query_of(project))


def test_another_selection_is_checked_and_another_projects_check_is_its_own(project, other_project, jobs, checks):
    built(project)
    walks = len(checks)
    assert stored.build(STORED_JOBS, query_of(other_project)) == 0
    Job.objects.create(project=other_project, kind="k-other")
    assert stored.build(STORED_JOBS, query_of(other_project)) == 1
    assert built(project) == 0
    assert len(checks) == walks + 1 + 2  # the other project's empty check, its derivation and check; not this one's
    assert StoredCheck.objects.filter(kind=STORED_JOBS.name).count() == 2


def test_the_sweep_drops_the_checks_of_another_version(project, jobs):
    built(project)
    for kind, version in ((STORED_JOBS.name, 9), ("gone.kind", 1)):
        StoredCheck.objects.create(kind=kind, version=version, project=project, checked="sources", fingerprint="0")
    stored.sweep()
    kept = StoredCheck.objects.filter(kind__in=[STORED_JOBS.name, "gone.kind"]).values_list("kind", "version")
    assert list(kept) == [(STORED_JOBS.name, 1)]


def test_the_text_hash_is_the_same_for_the_same_text_on_each_database(jobs):
    hashed = dict(Job.objects.annotate(hashed=TextHash(Concat("kind", Value(":x")))).values_list("kind", "hashed"))
    again = dict(Job.objects.annotate(hashed=TextHash(Concat("kind", Value(":x")))).values_list("kind", "hashed"))
    assert hashed == again and len(set(hashed.values())) == len(jobs)
    bits = 64 if connection.vendor == "postgresql" else 32
    assert all(-2 ** (bits - 1) <= value < 2 ** (bits - 1) for value in hashed.values())
