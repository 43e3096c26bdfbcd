import pytest

from dataplatform.exports import services
from dataplatform.jobs.services import execute_job

from . import kinds, stored_kind  # noqa: F401  (registers test.synthetic, test.stored_jobs, ...)


@pytest.fixture(autouse=True)
def _exports_in_tmp(export_storage_in_tmp):
    """Every export test writes under its own temporary DATA_DIR."""


@pytest.fixture
def run_export(project, members, django_capture_on_commit_callbacks):
    """Create an export of `project` and run its job inline; returns the refreshed Export."""

    def run(**options):
        options = {"kind": "test.synthetic"} | options
        with django_capture_on_commit_callbacks(execute=False):
            export = services.create_export(project=project, user=members["curator"], options=options)
        execute_job(job_id=export.job_id)
        export.refresh_from_db()
        export.job.refresh_from_db()
        return export

    return run
