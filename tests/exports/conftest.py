import pytest

from dataplatform.exports import services
from dataplatform.jobs.services import execute_job

from . import kinds  # noqa: F401  (registers test.synthetic)


@pytest.fixture(autouse=True)
def export_storage_in_tmp(settings, tmp_path):
    """Each test writes its exports under its own temporary DATA_DIR."""
    from django.core.files.storage import storages

    settings.DATA_DIR = tmp_path
    settings.STORAGES = {**settings.STORAGES, "exports": {
        "BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path / "files")}}}
    storages._storages.pop("exports", None)
    yield tmp_path / "files"
    storages._storages.pop("exports", None)


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
