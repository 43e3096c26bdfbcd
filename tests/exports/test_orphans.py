"""The sweep of export files no export can serve (exports/orphans.py), on the filesystem storage: it removes the
folders of exports that are gone or that failed for good, after the grace period, and nothing else."""

import pytest
from django.core.files.base import ContentFile
from django.utils import timezone

from dataplatform.exports import orphans
from dataplatform.exports.storage import storage_named
from dataplatform.jobs.models import Job

pytestmark = pytest.mark.django_db


def test_the_sweep_removes_what_no_export_can_serve_and_keeps_the_rest(run_export, settings, export_storage_in_tmp):
    files = storage_named("exports-files")
    served = run_export(filters={"n": 5})
    failed = run_export(filters={"n": 5})
    Job.objects.filter(pk=failed.job_id).update(state="failed", finished_at=timezone.now())
    left = sorted(files.listdir(failed.location)[1])  # as a failed attempt the store did not let remove them leaves
    gone = "exports/alpha/999999"  # a deleted export whose files' removal failed after its commit
    files.save(f"{gone}/train-00000.parquet", ContentFile(b"left by a delete"))
    files.save("exports/alpha/notes/keep.txt", ContentFile(b"not an export's folder"))
    kept = sorted(files.listdir(served.location)[1])

    settings.EXPORTS_ORPHAN_GRACE_SECONDS = 3600  # the failed export may still be retried by a person
    assert orphans.sweep_orphans() == {"removed": {"exports-files": [gone]}, "unreachable": []}
    assert sorted(files.listdir(failed.location)[1]) == left

    settings.EXPORTS_ORPHAN_GRACE_SECONDS = 0
    assert orphans.sweep_orphans() == {"removed": {"exports-files": [failed.location]}, "unreachable": []}
    assert files.listdir(failed.location)[1] == [] and files.listdir(gone)[1] == []
    assert sorted(files.listdir(served.location)[1]) == kept and files.exists("exports/alpha/notes/keep.txt")
