"""`platform.jobs` (dataplatform/exports/exporters.py) reads the rows its old Python generator gave, through the
engine's values() path: Arrow on PostgreSQL, the ORM on SQLite."""

from datetime import timedelta

import pyarrow.parquet as pq
import pytest
from django.db import connection
from django.utils import timezone

from dataplatform.exports import services
from dataplatform.jobs.models import Job, JobState
from dataplatform.jobs.services import execute_job

from ..kind_oracle import assert_same_rows
from .legacy_rows import jobs_rows

# The ADBC connection (PostgreSQL's read path) is a connection of its own: it sees committed rows only.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def jobs(project, members, other_project):
    now = timezone.now()
    made = []
    for n in range(8):
        made.append(Job.objects.create(
            project=project, kind=["atd.score", "labeler.autolabel"][n % 2],
            state=[JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.RUNNING][n % 4],
            progress_done=n, progress_total=2 * n, attempts=n % 3, error="boom é\n" if n % 4 == 1 else "",
            created_by=members["curator"] if n % 3 else None, started_at=None if n == 2 else now,
            finished_at=now + timedelta(seconds=n)))
    Job.objects.create(project=other_project, kind="atd.score", state=JobState.SUCCEEDED)
    return made


@pytest.mark.parametrize("filters", [{}, {"status": ["failed"]}, {"job_kind": "atd.score"}])
def test_job_rows_are_the_old_generator_s(jobs, project, filters):
    path = "postgresql-arrow" if connection.vendor == "postgresql" else "orm-values"
    rows = assert_same_rows("platform.jobs", project, jobs_rows, filters, expect_path=path)
    assert rows and {row["state"] for row in rows} <= {"succeeded", "failed", "cancelled"}
    if not filters:
        assert len(rows) == 6 and {row["created_by"] for row in rows} == {None, "curator"}
        assert any(row["started_at"] is None for row in rows)


def test_platform_jobs_kind_exports_the_job_history(project, members, django_capture_on_commit_callbacks,
                                                   export_storage_in_tmp):
    Job.objects.create(project=project, kind="demo.sample_continuations", params={}, state=JobState.FAILED,
                       error="boom", created_by=members["admin"])
    Job.objects.create(project=project, kind="demo.sample_continuations", params={}, state=JobState.SUCCEEDED)
    with django_capture_on_commit_callbacks(execute=False):
        export = services.create_export(project=project, user=members["curator"],
                                        options={"kind": "platform.jobs", "filters": {"status": ["failed"]}})
    execute_job(job_id=export.job_id)
    export.refresh_from_db()
    rows = pq.read_table(export_storage_in_tmp / export.location / "train-00000.parquet").to_pylist()
    assert [(r["state"], r["error"], r["created_by"]) for r in rows] == [("failed", "boom", "admin")]


def test_platform_jobs_leaves_out_unfinished_jobs(project, members, django_capture_on_commit_callbacks,
                                                  export_storage_in_tmp):
    for state in (JobState.SUCCEEDED, JobState.RUNNING, JobState.QUEUED, JobState.CANCELLED):
        Job.objects.create(project=project, kind="demo.sample_continuations", params={}, state=state)
    with django_capture_on_commit_callbacks(execute=False):
        export = services.create_export(project=project, user=members["curator"], options={"kind": "platform.jobs"})
    execute_job(job_id=export.job_id)
    export.refresh_from_db()
    rows = pq.read_table(export_storage_in_tmp / export.location / "train-00000.parquet").to_pylist()
    assert sorted(r["state"] for r in rows) == ["cancelled", "succeeded"]  # not its own running job either
