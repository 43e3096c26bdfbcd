"""Stored kinds (exports/stored.py): rows derived once per source, read back as the live derivation gives them."""

import dataclasses

import pyarrow as pa
import pytest
from django.db import connection

from dataplatform.exports import stored, stored_windows
from dataplatform.exports.models import StoredRow
from dataplatform.jobs.models import Job, JobState
from tests.exporting import export_rows

from .stored_kind import DERIVED, STORED_JOBS, query_of

# The Arrow-native read (ADBC) is a connection of its own: it sees committed rows only.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def jobs(project):
    DERIVED.clear()
    params = [{"copies": 2, "answer": "two <b>&</b>"}, {}, {"copies": 0}, {"answer": "x" * 3000}, {"copies": 3}]
    return [Job.objects.create(project=project, kind=f"k{i}", params=params[i % len(params)]) for i in range(11)]


def test_stored_rows_read_back_as_the_live_derivation_gives_them(project, jobs):
    query = query_of(project)
    expected = stored.live_rows(STORED_JOBS, query)
    assert len(expected) == 2 + 1 + 0 + 1 + 3 + 2 + 1 + 0 + 1 + 3 + 2  # the copies of the 11 jobs
    DERIVED.clear()
    assert stored.stored_read_rows(STORED_JOBS, query) == expected
    assert sorted(DERIVED) == sorted(job.pk for job in jobs)  # the export's catch-up derived each job once
    assert expected[0]["messages"][0]["content"] == f"line one\nline \"two\" of {jobs[0].kind}"
    assert expected[0]["created_at"] == jobs[0].created_at  # to the microsecond, with its zone
    assert {row["state"] for row in expected} == {JobState.QUEUED}


def test_a_source_is_derived_once_and_one_without_rows_is_not_derived_again(project, jobs):
    query = query_of(project)
    assert stored.build(STORED_JOBS, query) == len(jobs)
    DERIVED.clear()
    assert stored.build(STORED_JOBS, query) == 0
    stored.stored_read_rows(STORED_JOBS, query)
    assert DERIVED == []
    # The jobs that give no row keep one empty row each, which no export reads.
    empty = StoredRow.objects.filter(kind=STORED_JOBS.name, row__isnull=True)
    assert sorted(empty.values_list("source_id", flat=True)) == [jobs[2].pk, jobs[7].pk]


def test_the_engine_reads_a_stored_kind_on_the_fast_path(project, members, jobs, export_storage_in_tmp):
    export, rows = export_rows(project, members["curator"], export_storage_in_tmp, "test.stored_jobs")
    assert export.manifest["read_path"] == ("stored-postgresql-arrow" if connection.vendor == "postgresql"
                                            else "stored-orm")
    by_id = {row["id"]: row for row in rows}
    assert [by_id[row["id"]] for row in stored.live_rows(STORED_JOBS, query_of(project))] == sorted(
        rows, key=lambda row: (row["job_id"], row["copy"]))


def test_a_live_column_is_read_at_export_time(project, jobs):
    query = query_of(project)
    stored.build(STORED_JOBS, query)
    Job.objects.filter(pk=jobs[0].pk).update(state=JobState.SUCCEEDED)
    DERIVED.clear()
    rows = stored.stored_read_rows(STORED_JOBS, query)
    assert [row["state"] for row in rows if row["job_id"] == jobs[0].pk] == [JobState.SUCCEEDED] * 2
    assert DERIVED == []  # a live column needs no new derivation


def test_a_source_changed_in_place_is_derived_again_and_its_old_rows_dropped(project, jobs):
    query = query_of(project)
    stored.build(STORED_JOBS, query)
    Job.objects.filter(pk=jobs[4].pk).update(progress_done=7, params={"copies": 1})
    DERIVED.clear()
    rows = stored.stored_read_rows(STORED_JOBS, query)
    assert DERIVED == [jobs[4].pk]
    assert [(row["copy"], row["progress_done"]) for row in rows if row["job_id"] == jobs[4].pk] == [(0, 7)]
    assert rows == stored.live_rows(STORED_JOBS, query)
    # The three rows derived before the change stay until the sweep drops them.
    assert StoredRow.objects.filter(kind=STORED_JOBS.name, source_id=jobs[4].pk).count() == 4
    assert stored.sweep()["dropped"] == 3
    assert StoredRow.objects.filter(kind=STORED_JOBS.name, source_id=jobs[4].pk).count() == 1


def test_a_new_version_of_the_kind_derives_its_rows_again(project, jobs):
    query = query_of(project)
    stored.build(STORED_JOBS, query)
    bumped = dataclasses.replace(STORED_JOBS, version=2)
    DERIVED.clear()
    assert stored.stored_read_rows(bumped, query) == stored.live_rows(STORED_JOBS, query)
    assert sorted(set(DERIVED)) == sorted(job.pk for job in jobs)
    # The registered kind is still version 1: the sweep drops the rows of version 2, and those of a job gone.
    of_version_2 = StoredRow.objects.filter(version=2).count()
    Job.objects.filter(pk=jobs[0].pk).delete()
    assert stored.sweep()["dropped"] == of_version_2 + 2
    assert not StoredRow.objects.filter(source_id=jobs[0].pk).exists()


def test_two_builders_of_the_same_sources_store_each_row_once(project, jobs):
    query = query_of(project)
    ids = [job.pk for job in jobs]
    revisions = {pk: "0" for pk in ids}
    first = stored._derive(STORED_JOBS, project, ids)
    stored._store(STORED_JOBS, project, revisions, first)
    stored._store(STORED_JOBS, project, revisions, stored._derive(STORED_JOBS, project, ids))
    assert StoredRow.objects.filter(kind=STORED_JOBS.name).count() == sum(len(rows) or 1 for rows in first.values())
    assert stored.stored_read_rows(STORED_JOBS, query) == stored.live_rows(STORED_JOBS, query)


def test_a_row_that_does_not_fit_the_schema_fails_the_build_naming_the_kind(project, jobs):
    broken = dataclasses.replace(STORED_JOBS, stored=dataclasses.replace(
        STORED_JOBS.stored, derive=lambda project, ids: [(ids[0], {"id": "not a number"})]))
    with pytest.raises(ValueError, match="test.stored_jobs.*does not fit its schema"):
        stored.build(broken, query_of(project))
    assert not StoredRow.objects.exists()  # nothing half-written


def test_a_row_of_another_source_is_refused(project, jobs):
    stray = dataclasses.replace(STORED_JOBS, stored=dataclasses.replace(
        STORED_JOBS.stored, derive=lambda project, ids: [(-1, {})]))
    with pytest.raises(ValueError, match="source -1, which it was not given"):
        stored.build(stray, query_of(project))


def test_other_projects_rows_are_neither_derived_nor_read(project, other_project, jobs):
    Job.objects.create(project=other_project, kind="theirs", params={"copies": 2})
    rows = stored.stored_read_rows(STORED_JOBS, query_of(project))
    assert {row["job_id"] for row in rows} <= {job.pk for job in jobs}
    assert not StoredRow.objects.filter(project=other_project).exists()


def test_stored_schema_leaves_the_live_columns_out():
    assert STORED_JOBS.stored.stored_schema(STORED_JOBS.schema).names == [
        name for name in STORED_JOBS.schema.names if name != "state"]
    assert isinstance(STORED_JOBS.schema.field("state").type, pa.DataType)


def test_large_documents_are_read_in_fewer_rows_a_batch(project, jobs, settings):
    query = query_of(project, batch_size=10_000)
    stored.build(STORED_JOBS, query)
    settings.EXPORT_STORED_BATCH_BYTES = 64 * 1024 * 1024  # more than 10,000 of these rows hold: the batch size
    assert stored_windows.rows_per_batch(STORED_JOBS, query) == 10_000
    settings.EXPORT_STORED_BATCH_BYTES = 1200  # about two rows of the test kind (one holds a 3,000-character answer)
    per_batch = stored_windows.rows_per_batch(STORED_JOBS, query)
    assert 1 <= per_batch <= 3
    _, batches = stored.read(STORED_JOBS, query)
    sizes = [batch.num_rows for batch in batches]
    assert max(sizes) <= per_batch and sum(sizes) == len(stored.live_rows(STORED_JOBS, query))
