"""Start a real `celery worker` process against the test database and the test Redis, and wait for its jobs."""

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from dataplatform.jobs.models import Job

ROOT = Path(__file__).resolve().parents[1]

# For fault tests: a worker that notices a silent job within ~2 s (heartbeat every 0.5 s) and
# re-sends jobs queued for over 1 s, reaping every second.
QUICK_REAPER = {"JOB_HEARTBEAT_SECONDS": "0.5", "JOB_STALE_AFTER_SECONDS": "2", "JOB_REAP_INTERVAL_SECONDS": "1",
                "JOB_REPUBLISH_QUEUED_AFTER_SECONDS": "1"}


def worker_database_url() -> str:
    """The URL of the database pytest-django created, so the worker sees the test's rows."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        if connection.is_in_memory_db():
            pytest.fail("A worker cannot open an in-memory SQLite database (tests/conftest.py names a file).")
        return f"sqlite:///{Path(db['NAME']).resolve()}"
    if connection.vendor != "postgresql":
        pytest.fail(f"Integration tests need PostgreSQL or SQLite, not {connection.vendor}.")
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


class LiveWorker:
    def __init__(self, tmp_path: Path, env_overrides: dict[str, str], include: tuple[str, ...] = ()):
        """`include`: more modules for the worker to import, e.g. "tests.jobs.kinds" for the test job kinds."""
        if not settings.REDIS_URL:
            pytest.fail("Integration tests need Redis: set REDIS_URL=redis://... (bin/test does).")
        self.name = f"test-{uuid.uuid4().hex[:8]}@localhost"
        self.log_path = tmp_path / f"{self.name}.log"
        env = os.environ | {
            "DATABASE_URL": worker_database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "CELERY_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE,
            "DATA_DIR": str(settings.DATA_DIR),
            "JOB_RETRY_BACKOFF_SECONDS": "0.3",
            "JOB_MAX_RETRIES": "2",
            "CELERY_BEAT_SCHEDULE_FILENAME": str(tmp_path / f"{self.name}-beat-schedule"),
        } | env_overrides
        command = [sys.executable, "-m", "celery", "-A", "dataplatform", "worker", "-B", "--loglevel=INFO",
                   "--concurrency=1", "-n", self.name, "-Q", settings.CELERY_TASK_DEFAULT_QUEUE,
                   "--without-gossip", "--without-mingle"]
        if include:
            command += ["--include", ",".join(include)]
        self._log = open(self.log_path, "w")
        # Its own process group: kill() takes the pool children and the embedded beat down with it.
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                        start_new_session=True)

    def wait_ready(self, timeout: float = 90.0) -> None:
        from dataplatform.celery import app

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"The worker exited with {self.process.returncode}:\n{self.log()}")
            if app.control.ping(destination=[self.name], timeout=0.5):
                return
        pytest.fail(f"The worker did not answer a ping within {timeout} s:\n{self.log()}")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text()[-5000:]

    def kill(self) -> None:
        """SIGKILL the whole worker (main process, pool children, beat): a crash, no clean-up at all."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        """After its test: killed, like kill(). A warm shutdown (SIGTERM) took ~2.5 s a worker (its beat and pool
        wound down) and handed the messages it had taken back to the queue, for the next test's worker to get;
        nothing of a worker is used once its test is over."""
        if self.process.poll() is None:
            self.kill()
        self._log.close()


def wait_for_terminal(job_id: int, worker, timeout: float = 120.0) -> tuple[Job, list[tuple[str, int, int, str]]]:
    """Poll the job row like the progress bar does; return the final row and every distinct state seen."""
    seen: list[tuple[str, int, int, str]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = Job.objects.get(pk=job_id)
        snapshot = (job.state, job.progress_done, job.progress_total, job.status_message)
        if not seen or seen[-1] != snapshot:
            seen.append(snapshot)
        if job.is_terminal:
            return job, seen
        time.sleep(0.05)
    pytest.fail(f"Job {job_id} did not finish in {timeout} s; seen {seen[-5:]}\nworker log:\n{worker.log()}")
