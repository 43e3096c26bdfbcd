"""A stored kind's live columns read as one JSON document (StoredRows.live_document): nested columns (a list, a
struct) and many columns in one subquery, read at export time beside the stored document."""

import dataclasses

import pyarrow as pa
import pytest
from django.db import connection

from dataplatform.exports import stored, stored_live, stored_windows
from dataplatform.exports.registry import ExportQuery
from dataplatform.jobs.models import Job, JobState
from tests.exporting import export_rows

from . import stored_kind
from .stored_kind import DERIVED, STORED_JOBS_DOCUMENT

# The Arrow-native read (ADBC) is a connection of its own: it sees committed rows only.
pytestmark = pytest.mark.django_db(transaction=True)
KIND = STORED_JOBS_DOCUMENT


@pytest.fixture
def jobs(project):
    DERIVED.clear()
    params = [{"copies": 2, "tags": ["a", "ünï 🙂", "with \"quotes\"\n"]}, {"tags": []}, {"copies": 0}, {}]
    return [Job.objects.create(project=project, kind=f"k{i}", params=params[i % len(params)], progress_done=i,
                               progress_total=10) for i in range(6)]


def query_of(project) -> ExportQuery:
    return stored_kind.query_of(project, batch_size=2)


def test_nested_live_columns_read_back_as_the_live_derivation_gives_them(project, jobs):
    query = query_of(project)
    live = stored.live_rows(KIND, query)
    assert stored.stored_read_rows(KIND, query) == live
    first = [row for row in live if row["job_id"] == jobs[0].pk]
    assert [row["tags"] for row in first] == [["a", "ünï 🙂", "with \"quotes\"\n"]] * 2
    assert first[0]["progress"] == {"done": 0, "total": 10} and first[0]["state"] == JobState.QUEUED
    assert {row["job_id"]: row["tags"] for row in live}[jobs[1].pk] == []
    assert {row["job_id"]: row["tags"] for row in live}[jobs[3].pk] is None  # no tags: null


def test_the_live_document_is_read_at_export_time_without_deriving_again(project, jobs):
    query = query_of(project)
    stored.build(KIND, query)
    Job.objects.filter(pk=jobs[1].pk).update(state=JobState.SUCCEEDED, params={"tags": ["new"]}, progress_total=99)
    DERIVED.clear()
    rows = [row for row in stored.stored_read_rows(KIND, query) if row["job_id"] == jobs[1].pk]
    assert [(row["state"], row["tags"], row["progress"]["total"]) for row in rows] == [
        (JobState.SUCCEEDED, ["new"], 99)]
    assert DERIVED == []


def test_an_export_reads_the_live_document_on_the_fast_path(project, members, jobs, export_storage_in_tmp):
    export, rows = export_rows(project, members["curator"], export_storage_in_tmp, KIND.name)
    assert export.manifest["read_path"] == ("stored-postgresql-arrow" if connection.vendor == "postgresql"
                                            else "stored-orm")
    live = stored.live_rows(KIND, query_of(project))
    assert sorted(rows, key=lambda row: row["id"]) == sorted(live, key=lambda row: row["id"])


def test_a_nested_live_column_needs_the_live_document():
    spec = dataclasses.replace(KIND.stored, live_document=None)
    kind = dataclasses.replace(KIND, name="test.nested_live", stored=spec)
    with pytest.raises(ValueError, match="live column 'tags' must be a plain column"):
        spec.check(kind)
    assert KIND.stored.stored_schema(KIND.schema).names == ["id", "job_id", "title"]


def test_sources_spread_among_another_project_s_read_their_own_documents(project, other_project, jobs):
    # Another project's jobs between this one's: the batch's sources span more than twice their number of ids, so
    # their documents are asked by the list of ids, not by the range (which would also hold the other's jobs).
    for job in jobs:
        for _ in range(2):
            Job.objects.create(project=other_project, kind="other", params={"tags": ["theirs"]})
        Job.objects.create(project=project, kind="late", params={"tags": [f"after {job.pk}"]})
    query = query_of(project)
    ids = sorted(Job.objects.filter(project=project, kind="late").values_list("pk", flat=True))
    assert ids[-1] - ids[0] >= 2 * len(ids)
    sql = str(stored_live.documents_of(KIND.stored, query, ids).query)
    assert '"jobs_job"."id" IN (' in sql and '"jobs_job"."id" >=' not in sql
    dense = str(stored_live.documents_of(KIND.stored, query, ids[:1] + [ids[0] + 1]).query)
    assert '"jobs_job"."id" >=' in dense and '"jobs_job"."id" IN (' not in dense
    # So are a window's, read ahead with its rows: by a subquery on the window's rows (four rows a window: the late
    # jobs' rows span three ids each).
    wide = stored_kind.query_of(project, batch_size=4)
    stored.build(KIND, wide)
    windows = [window for window in stored_windows.windows(KIND, wide) if window.last - window.first >= 2 * window.rows]
    assert windows and all('"jobs_job"."id" IN (SELECT' in str(stored_live.window_documents(KIND, wide, window).query)
                           for window in windows)
    assert stored.stored_read_rows(KIND, wide) == stored.live_rows(KIND, wide)
    live = stored.live_rows(KIND, query)
    assert stored.stored_read_rows(KIND, query) == live
    assert {row["job_id"]: row["tags"] for row in live if row["job_id"] in ids} == {
        job.pk: job.params["tags"] for job in Job.objects.filter(pk__in=ids)}


def test_a_row_whose_source_is_gone_reads_an_empty_live_document(project, jobs):
    gone = jobs[2].pk
    Job.objects.filter(pk=gone).delete()
    live = stored_live.live_arrays(KIND, query_of(project), {stored_live.SOURCE: pa.array([jobs[0].pk, gone, jobs[0].pk])})
    assert live["tags"].to_pylist() == [jobs[0].params["tags"], None, jobs[0].params["tags"]]
    assert live["state"].to_pylist() == [JobState.QUEUED, None, JobState.QUEUED]


def test_the_live_derivation_leaves_out_unselected_sources_its_range_of_documents_holds(project, jobs):
    # A job the kind does not select (an export's) between selected ones: the documents, asked by range, hold it.
    Job.objects.create(project=project, kind="exports.run", params={"tags": ["not a source"]})
    Job.objects.create(project=project, kind="k-late", params={"tags": ["late"]})
    query = query_of(project)
    selected = sorted(KIND.stored.sources(query).values_list("pk", flat=True))
    assert '"jobs_job"."id" >=' in str(stored_live.documents_of(KIND.stored, query, selected).query)  # a range
    live = stored.live_rows(KIND, query)
    assert {row["job_id"] for row in live} <= set(selected)
    assert stored.stored_read_rows(KIND, query) == live
