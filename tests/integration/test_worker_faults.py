"""Faults around the workers, with the real parts: a live Celery worker, Redis, PostgreSQL.

- Redis restarts while jobs are queued (it keeps nothing on disk): the messages are gone, the job
  rows say "queued"; the reaper sends them again and each job runs exactly once.
- The worker is SIGKILLed mid-export: the job row is left "running"; a new worker's reaper queues it
  again and the rerun writes the export exactly once (the shards of the killed run are replaced).
(SIGKILL mid-scoring: tests/corpora/atd/test_crash.py; mid-replay: tests/corpora/aed/test_replay_worker.py;
the database restarting mid-save:
tests/annotate/test_database_faults.py.)
"""

import json
import time

import pyarrow.parquet as pq
import pytest
import redis
from django.conf import settings
from django.db import connection

from dataplatform.exports import services as export_services
from dataplatform.exports.models import Export
from dataplatform.jobs.models import Job, JobState

from ..exports import kinds, stored_kind  # noqa: F401  (register the test kinds, which the worker imports too)
from ..worker import QUICK_REAPER, wait_for_terminal

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def finished_jobs(project, user, count: int) -> None:
    Job.objects.bulk_create([Job(project=project, kind="demo.sample_continuations", params={"i": i},
                                 state=JobState.SUCCEEDED, created_by=user) for i in range(count)])


def restart_redis_without_persistence() -> None:
    """What a restart does to the data of this test's Redis database: every key is gone (queued
    messages, bindings, cache entries). Other databases of the server are untouched. (No worker runs
    at that moment; the clients that reconnect are tested by kombu itself.)"""
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.flushdb()
    client.close()


def exported_rows(export: Export, folder) -> list[dict]:
    return [row for shard in export.manifest["shards"] for row in pq.read_table(folder / shard["name"]).to_pylist()]


def test_jobs_queued_when_redis_restarts_are_sent_again_and_run_once(project, members, start_worker,
                                                                      export_storage_in_tmp):
    finished_jobs(project, members["admin"], 30)
    restart_redis_without_persistence()  # start from an empty queue (earlier tests' workers leave reap messages)
    exports = [export_services.create_export(project=project, user=members["curator"],
                                             options={"kind": "platform.jobs", "shard_rows": 10,
                                                      "filters": {"job_kind": "demo.sample_continuations"}})
               for _ in range(2)]
    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    assert redis.Redis.from_url(settings.REDIS_URL).llen(queue) == 2  # both published, no worker yet
    restart_redis_without_persistence()
    assert redis.Redis.from_url(settings.REDIS_URL).llen(queue) == 0  # the messages are lost

    worker = start_worker(**QUICK_REAPER)
    for export in exports:
        job, _ = wait_for_terminal(export.job_id, worker, timeout=120)
        assert job.state == JobState.SUCCEEDED, f"{job.error}\n{worker.log()}"
        assert job.attempts == 1  # re-sent, maybe more than once, but run once: duplicates are dropped
        export.refresh_from_db()
        rows = exported_rows(export, export_storage_in_tmp / export.location)
        assert len(rows) == len({row["id"] for row in rows}) == 30
    assert "Reaper: requeued [], failed [], re-sent [" in worker.log_path.read_text()


# platform.jobs and test.job_values are read on the Arrow-native path (ADBC); test.stored_jobs derives its rows in
# Python, once (the export catches them up before it reads the stored documents).
@pytest.mark.parametrize("kind, include", [("platform.jobs", ()), ("test.job_values", ("tests.exports.kinds",)),
                                           ("test.stored_jobs", ("tests.exports.stored_kind",))])
def test_an_export_whose_worker_is_killed_is_rerun_and_written_once(project, members, start_worker,
                                                                    export_storage_in_tmp, kind, include):
    # 100 shards, as 20,000 rows in shards of 200 made, from a tenth of the rows: the export still runs ~0.5 s,
    # over ten times what the kill takes to land, and the rows take ~0.3 s to make, not ~4 s.
    finished_jobs(project, members["admin"], 2_000)
    first = start_worker(include=include, **QUICK_REAPER)
    export = export_services.create_export(project=project, user=members["curator"],
                                           options={"kind": kind, "shard_rows": 20, "format": "jsonl"})
    deadline = time.monotonic() + 120
    while Job.objects.get(pk=export.job_id).state != JobState.RUNNING:
        assert time.monotonic() < deadline, first.log()
        time.sleep(0.02)
    first.kill()
    job = Job.objects.get(pk=export.job_id)
    assert job.state == JobState.RUNNING, "the kill must land while the export runs"

    second = start_worker(include=include, **QUICK_REAPER)
    job, _ = wait_for_terminal(export.job_id, second, timeout=180)
    assert job.state == JobState.SUCCEEDED and job.attempts == 2, f"{job.error}\n{second.log()}"
    export.refresh_from_db()
    folder = export_storage_in_tmp / export.location
    names = sorted(path.name for path in folder.iterdir())
    assert names == sorted([shard["name"] for shard in export.manifest["shards"]] + ["README.md", "manifest.json"])
    ids = [json.loads(line)["id"] for shard in export.manifest["shards"]
           for line in (folder / shard["name"]).read_text().splitlines()]
    assert len(ids) == len(set(ids)) == export.manifest["totals"]["rows"] >= 2_000
    arrow = connection.vendor == "postgresql"  # SQLite: the ORM's
    assert export.manifest["read_path"] == (("stored-postgresql-arrow" if arrow else "stored-orm")
                                            if kind == "test.stored_jobs" else "postgresql-arrow" if arrow else "orm-values")
