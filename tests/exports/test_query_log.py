"""With DEBUG on (the embedded mode), an export and a build of stored rows do not keep the SQL of every query they
ran (exports/query_log.py): it grew with their pages, ~200 KB a page of stored rows inserted."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dataplatform.exports import stored
from dataplatform.exports.registry import ExportQuery
from dataplatform.jobs.models import Job

from .stored_kind import STORED_JOBS

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def debug_on(settings):
    settings.DEBUG = True  # Django logs every query's SQL (connection.queries_logged) while it is on
    connection.queries_log.clear()


def _jobs(project, count: int) -> None:
    for i in range(count):
        Job.objects.create(project=project, kind=f"k{i}", params={"answer": "x" * 2000})


def test_a_build_keeps_no_log_of_its_pages(project, debug_on):
    _jobs(project, 12)  # test.stored_jobs derives 3 sources a page: 4 pages, each a read, a derivation, an insert
    query = ExportQuery(project=project, filters={}, data_version="stored-jobs-v1")
    assert stored.build(STORED_JOBS, query) == 12
    assert len(connection.queries_log) <= 3  # the last page's queries at most, not every page's


def test_a_query_count_asked_for_is_kept(project, debug_on):
    _jobs(project, 12)
    query = ExportQuery(project=project, filters={}, data_version="stored-jobs-v1")
    with CaptureQueriesContext(connection) as captured:  # a forced debug cursor: the log is the caller's
        stored.build(STORED_JOBS, query)
    assert len(captured) >= 4 * 3


def test_an_export_keeps_no_log_of_its_batches(project, debug_on, run_export, settings):
    _jobs(project, 40)
    settings.EXPORT_BATCH_ROWS = 5  # 8 batches, each its window's query, after a catch-up build of 14 pages
    export = run_export(kind="test.stored_jobs", validation_ratio=0)
    assert export.rows_total == 40
    assert len(connection.queries_log) < 20  # what follows the last batch (manifest, job), not every batch's
