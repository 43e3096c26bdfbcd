"""The S3 store stopping in the middle of an export (tests/s3_store.py: moto's server, stopped and started again on
its port): the attempt's error is the upload's, the job is retried with the job system's backoff, nothing half-written
is ever offered, and the objects the failed attempt left are removed by the retry, or by the periodic sweep once the
retries are spent."""

import logging

import pytest
from botocore.config import Config

from dataplatform.exports import orphans, services
from dataplatform.exports.models import Export
from dataplatform.jobs import services as job_services
from dataplatform.jobs import tasks
from dataplatform.jobs.models import Job
from tests.conftest import api_client_for
from tests.s3_store import restart_s3_store, start_s3_store, stop_s3_store, use_s3

pytestmark = pytest.mark.django_db
# One try per request: botocore's own retries of a refused connection would only slow the test down.
ONE_TRY = Config(signature_version="s3v4", retries={"max_attempts": 1})
SHARDS_BEFORE_THE_OUTAGE = 2


@pytest.fixture
def store(settings, export_storage_in_tmp):
    """A store of this test's own (to stop), with new exports written to it under the prefix "mid"."""
    store = start_s3_store()
    use_s3(settings, store, "mid", client_config=ONE_TRY)
    yield store
    stop_s3_store(store)


@pytest.fixture
def outage_mid_export(monkeypatch, store):
    """Stops the store once the export has published SHARDS_BEFORE_THE_OUTAGE files."""
    published = []

    def publish_then_stop(storage, path, name):
        real_publish(storage, path, name)
        published.append(name)
        if len(published) == SHARDS_BEFORE_THE_OUTAGE:
            stop_s3_store(store)
            monkeypatch.setattr(services, "publish", real_publish)

    real_publish = services.publish
    monkeypatch.setattr(services, "publish", publish_then_stop)
    return published


def new_export(project, members, django_capture_on_commit_callbacks) -> Export:
    with django_capture_on_commit_callbacks(execute=False):  # the test runs the job itself
        return services.create_export(project=project, user=members["curator"],
                                      options={"kind": "test.synthetic", "filters": {"n": 60}, "shard_rows": 10})


def listed_keys(export: Export) -> list[str]:
    names = [shard["name"] for shard in export.manifest["shards"]] + ["README.md", "manifest.json"]
    return sorted(f"mid/{export.location}/{name}" for name in names)


def test_a_store_that_stops_mid_export_is_retried_and_the_retry_writes_the_export_whole(
        project, members, settings, monkeypatch, store, outage_mid_export, django_capture_on_commit_callbacks, caplog):
    settings.JOB_MAX_RETRIES = 2
    between_attempts = {}
    real_mark_retrying = job_services.mark_retrying

    def note_then_restart(**retrying):  # what the job shows while it waits for its retry, then the store comes back
        real_mark_retrying(**retrying)
        between_attempts["job"] = Job.objects.values("state", "error", "status_message").get(pk=retrying["job_id"])
        restart_s3_store(store)
        between_attempts["keys"] = store.keys("mid/")

    monkeypatch.setattr(job_services, "mark_retrying", note_then_restart)
    export = new_export(project, members, django_capture_on_commit_callbacks)
    with caplog.at_level(logging.WARNING):
        tasks.run_job.apply(args=[export.job_id])  # eager: the retry runs at once, in place of the countdown

    # The first attempt's error is the failed upload, not the cleanup's failed listing, which is logged beside it.
    waiting = between_attempts["job"]
    assert waiting["state"] == "queued"
    assert waiting["error"].startswith("The export storage exports-s3 is unavailable (EndpointConnectionError)")
    assert "Export storage unavailable (attempt 1 of 3); retrying in" in waiting["status_message"]
    assert "the files of its failed attempt were not removed" in caplog.text
    # The store came back holding what the failed attempt had published, and no manifest: nothing looks finished.
    assert len(between_attempts["keys"]) == SHARDS_BEFORE_THE_OUTAGE
    assert not any(key.endswith("manifest.json") for key in between_attempts["keys"])

    export.refresh_from_db()
    export.job.refresh_from_db()
    assert (export.job.state, export.job.attempts, export.job.error) == ("succeeded", 2, "")
    # The retry replaced the orphans: the bucket holds exactly what the manifest lists.
    assert store.keys("mid/") == listed_keys(export)


@pytest.mark.django_db(transaction=True)  # the sweep's reads and deletes outside a test transaction, as a worker's
def test_an_outage_that_outlasts_the_retries_fails_the_job_and_the_sweep_removes_its_orphans(
        project, members, settings, store, outage_mid_export, django_capture_on_commit_callbacks):
    settings.JOB_MAX_RETRIES = 0
    settings.EXPORTS_ORPHAN_GRACE_SECONDS = 0
    export = new_export(project, members, django_capture_on_commit_callbacks)
    tasks.run_job.apply(args=[export.job_id])
    export.refresh_from_db()
    export.job.refresh_from_db()
    assert export.job.state == "failed" and not export.manifest
    assert export.job.error.startswith("The export storage exports-s3 is unavailable (EndpointConnectionError)")
    assert export.job.error.endswith("It stayed unavailable after 1 attempts.")
    # Nothing half-written is offered: no manifest, no shard.
    trainer = api_client_for(members["trainer"])
    assert trainer.get(f"/api/v1/projects/alpha/exports/{export.pk}/manifest").status_code == 409

    # A sweep while the store is still down removes nothing and says so; once it is back, it removes the orphans.
    assert orphans.sweep_orphans() == {"removed": {}, "unreachable": ["exports-s3"]}
    restart_s3_store(store)
    assert len(store.keys(f"mid/{export.location}/")) == SHARDS_BEFORE_THE_OUTAGE
    assert orphans.sweep_orphans() == {"removed": {"exports-s3": [export.location]}, "unreachable": []}
    assert store.keys("mid/") == []
    assert Export.objects.filter(pk=export.pk).exists()  # the record stays, for a person to retry or delete


def test_a_store_that_refuses_the_platform_fails_the_export_at_once_naming_its_code(settings, run_export, store):
    use_s3(settings, store, "mid", client_config=ONE_TRY, bucket_name="not-the-bucket")
    export = run_export(filters={"n": 20})
    assert (export.job.state, export.job.attempts) == ("failed", 1)  # waiting would not help: not retried
    assert export.job.error.startswith("StoreRefused: The export storage exports-s3 refuses the platform's requests "
                                       "(AccessDenied)")
    assert store.keys() == [] and not export.manifest
