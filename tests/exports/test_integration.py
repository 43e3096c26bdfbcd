"""An export created over the API completes on a live Celery worker, and `manage.py pull` fetches it."""

import io
import json
import time

import pyarrow.parquet as pq
import pytest
from django.core.management import call_command

from dataplatform.exports.models import Export
from dataplatform.jobs.models import Job, JobState
from tests.conftest import api_client_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_api_export_on_a_live_worker_then_pull(live_server, project, members, start_worker, tmp_path):
    for i in range(25):
        Job.objects.create(project=project, kind="demo.sample_continuations", params={"i": i},
                           state=JobState.SUCCEEDED if i % 5 else JobState.FAILED, created_by=members["admin"])
    worker = start_worker()
    curator = api_client_for(members["curator"])
    created = curator.post("/api/v1/projects/alpha/exports/", {
        "kind": "platform.jobs", "filters": {"status": ["succeeded"]}, "shard_rows": 7, "validation_ratio": 0.2,
    }, format="json")
    assert created.status_code == 202
    export_id = created.json()["id"]

    trainer = api_client_for(members["trainer"])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        body = trainer.get(f"/api/v1/projects/alpha/exports/{export_id}/").json()
        if body["state"] in ("succeeded", "failed"):
            break
        time.sleep(0.2)
    assert body["state"] == "succeeded", f"{body['error']}\n{worker.log()}"
    assert body["rows_total"] == 20 and body["percent"] == 100

    from dataplatform.accounts import services as account_services

    _, secret = account_services.issue_token(user=members["trainer"], name="trainer-node", read_only=True)
    out = tmp_path / "pulled"
    call_command("pull", f"{live_server.url}/api/v1/projects/alpha/exports/{export_id}/", "--token", secret,
                 "--out", str(out), stdout=io.StringIO(), stderr=io.StringIO())
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest == Export.objects.get(pk=export_id).manifest
    rows = [row for shard in manifest["shards"] for row in pq.read_table(out / shard["name"]).to_pylist()]
    assert len(rows) == 20 and {row["state"] for row in rows} == {"succeeded"}
