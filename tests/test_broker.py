"""The embedded broker (dataplatform/broker.py): kombu's filesystem transport, making its folders when a
process connects, carries a job from a publisher to a real worker, as `bin/run` starts them."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kombu import Connection

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("data_folder_in", "data_folder_out", "processed_folder", "control_folder")


def test_the_filesystem_transport_makes_its_folders_when_it_connects(tmp_path):
    options = {option: str(tmp_path / "broker" / option) for option in FOLDERS}
    with Connection("filesystem://localhost//", transport="dataplatform.broker:FilesystemTransport",
                    transport_options=options | {"data_folder_out": options["data_folder_in"]}) as connection:
        assert not (tmp_path / "broker").exists()
        queue = connection.SimpleQueue("made-on-connect")
        queue.put({"hello": "worker"})
        assert queue.get(timeout=5).payload == {"hello": "worker"}
        queue.close()
    assert all(Path(options[option]).is_dir() for option in ("data_folder_in", "processed_folder", "control_folder"))


EMBEDDED = {"DATABASE_URL": "", "REDIS_URL": "", "MODEL_BACKEND": "local", "LOG_LEVEL": "WARNING"}

PUBLISH_AND_WAIT = """
import json, time
import tests.jobs.kinds
from dataplatform.accounts.services import create_project
from dataplatform.jobs import services

job = services.enqueue_job(project=create_project(slug="p", name="P"), kind="test.count", params={"to": 3}, user=None)
deadline = time.monotonic() + 120
while not job.is_terminal and time.monotonic() < deadline:
    time.sleep(0.2)
    job.refresh_from_db()
print(json.dumps({"state": job.state, "result": job.result, "error": job.error}))
"""


@pytest.fixture
def embedded_env(tmp_path):
    """The embedded mode's environment (SQLite and the filesystem broker under DATA_DIR, no Redis), with a
    DATA_DIR and a beat schedule folder that do not exist yet."""
    return os.environ | EMBEDDED | {"DATA_DIR": str(tmp_path / "data"),
                                    "CELERY_BEAT_SCHEDULE_FILENAME": str(tmp_path / "beat" / "schedule")}


def manage(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=240)


def test_a_job_runs_through_the_filesystem_broker_from_an_empty_data_dir(embedded_env, tmp_path):
    migrated = manage(embedded_env, "migrate", "--no-input", "-v0")
    assert migrated.returncode == 0, migrated.stderr[-3000:]  # the SQLite backend made DATA_DIR

    log_path = tmp_path / "worker.log"
    with open(log_path, "w") as log:
        # As bin/run starts it (-B: the embedded beat), plus the test job kinds.
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "dataplatform", "worker", "-B", "--loglevel=INFO",
             "--concurrency=1", "--include", "tests.jobs.kinds", "--without-gossip", "--without-mingle"],
            cwd=ROOT, env=embedded_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            published = manage(embedded_env, "shell", "-c", PUBLISH_AND_WAIT)
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:  # a warm shutdown slower than 30 s on a loaded machine (seen once in
                os.killpg(worker.pid, signal.SIGKILL)  # CI): not what this test is about; its job's outcome is
                worker.wait(timeout=30)

    assert published.returncode == 0, published.stderr[-3000:]
    job = json.loads(published.stdout.strip().splitlines()[-1])
    assert job == {"state": "succeeded", "result": {"counted": 3}, "error": ""}, log_path.read_text()[-5000:]
    broker_dir = Path(embedded_env["DATA_DIR"]) / "broker"
    assert {path.name for path in broker_dir.iterdir()} == {"queue", "processed", "control"}
    assert any((tmp_path / "beat").iterdir()), "the worker made the beat schedule's folder and the beat wrote there"


class FakeControl:
    def __init__(self, replies):
        self.replies = replies

    def ping(self, timeout, limit=None):
        self.asked = {"timeout": timeout, "limit": limit}
        if isinstance(self.replies, Exception):
            raise self.replies
        return self.replies


@pytest.mark.parametrize("replies, ok, detail, names", [
    ([{"w2@host": {"ok": "pong"}}, {"w1@host": {"ok": "pong"}}], True, "2 alive", ("w1@host", "w2@host")),
    ([], False, "no worker answered a ping within 1 s; start one with `", ()),
    (ConnectionError("refused"), False, "ping failed: refused", ()),
])
def test_ping_workers_says_who_answered_or_why_none_did(monkeypatch, replies, ok, detail, names):
    """The ping both the system page and a job page's stalled warning read (the job pages stand below system)."""
    from dataplatform.broker import ping_workers
    from dataplatform.celery import app

    monkeypatch.setattr(app, "control", FakeControl(replies))
    workers = ping_workers(timeout=1.0)
    assert (workers.ok, workers.names) == (ok, names) and workers.detail.startswith(detail)
