"""An export created over the API completes on a live Celery worker, and a trainer's machine pulls it with the pull
script into the folder that held the export it pulled before, and loads it."""

import json
import os
import subprocess
import sys
import time

import pytest
from datasets import load_dataset

from dataplatform.accounts import services as account_services
from dataplatform.exports import services as export_services
from dataplatform.exports.models import Export
from dataplatform.exports.pull_script import dataplatform_pull
from dataplatform.jobs.models import Job, JobState
from dataplatform.jobs.services import execute_job
from tests.conftest import api_client_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def pull(url: str, out, token: str) -> subprocess.CompletedProcess:
    """The pull script as a trainer runs it: its own process, the token in the environment only."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("DJANGO")} | {
        dataplatform_pull.TOKEN_VARIABLE: token}
    result = subprocess.run([sys.executable, dataplatform_pull.__file__, url, "--out", str(out), "--backoff", "0.01"],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result


def test_api_export_on_a_live_worker_then_pull(live_server, project, members, start_worker, tmp_path):
    for i in range(25):
        Job.objects.create(project=project, kind="demo.sample_continuations", params={"i": i},
                           state=JobState.SUCCEEDED if i % 5 else JobState.FAILED, created_by=members["admin"])
    _, secret = account_services.issue_token(user=members["trainer"], name="trainer-node", read_only=True)
    exports_url = f"{live_server.url}/api/v1/projects/alpha/exports"
    # The trainer's folder already holds an earlier export: every job, in smaller shards, so more of them.
    earlier = export_services.create_export(project=project, user=members["curator"], publish=False, options={
        "kind": "platform.jobs", "shard_rows": 3, "validation_ratio": 0.5})
    execute_job(job_id=earlier.job_id)
    out = tmp_path / "pulled"
    pull(f"{exports_url}/{earlier.pk}/", out, secret)

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
    assert body["rows_total"] == 21 and body["percent"] == 100  # the 20 jobs, and the earlier export's

    result = pull(f"{exports_url}/{export_id}/", out, secret)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest == Export.objects.get(pk=export_id).manifest
    assert sorted(path.name for path in out.iterdir()) == sorted([s["name"] for s in manifest["shards"]]
                                                                 + ["README.md", "manifest.json"])
    assert result.stderr.count(": removed") > 0  # the earlier export's extra shards, named as they went
    dataset = load_dataset(str(out), cache_dir=str(tmp_path / "hf-cache"))  # by its card, this export's files only
    assert {split: len(rows) for split, rows in dataset.items()} == {
        split: totals["rows"] for split, totals in manifest["totals"]["by_split"].items() if totals["rows"]}
    rows = [row for split in dataset.values() for row in split]
    assert len(rows) == 21 and {row["state"] for row in rows} == {"succeeded"}
