"""A configured broker that cannot be reached is a clear error, never a silent inline run.

These run real `manage.py` processes with REDIS_URL pointing at a closed port.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.net import closed_port

ROOT = Path(__file__).resolve().parents[2]


def manage(tmp_path, *args, redis_url: str):
    env = os.environ | {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "DATA_DIR": str(tmp_path),
        "REDIS_URL": redis_url,
    }
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture
def dead_redis_url():
    return f"redis://:hunter2@127.0.0.1:{closed_port()}/0"


def test_startup_check_names_the_unreachable_broker(tmp_path, dead_redis_url):
    result = manage(tmp_path, "check", redis_url=dead_redis_url)
    assert result.returncode != 0
    assert "Cannot reach the Celery broker at redis://:***@127.0.0.1:" in result.stderr
    assert "Start Redis (or fix REDIS_URL)" in result.stderr
    assert "hunter2" not in result.stderr + result.stdout


def test_enqueue_with_unreachable_broker_fails_the_job_and_raises(tmp_path, dead_redis_url):
    migrate = manage(tmp_path, "migrate", "--skip-checks", "-v0", redis_url=dead_redis_url)
    assert migrate.returncode == 0, migrate.stderr
    script = (
        "from django.db import transaction\n"
        "from dataplatform.accounts.services import create_project\n"
        "from dataplatform.broker import BrokerUnavailable\n"
        "from dataplatform.jobs import services\n"
        "from dataplatform.jobs.models import Job\n"
        "project = create_project(slug='p', name='P')\n"
        "try:\n"
        "    with transaction.atomic():\n"
        "        services.enqueue_job(project=project, kind='demo.sample_continuations', params={'prompt': 'x'},"
        " user=None)\n"
        "except BrokerUnavailable as exc:\n"
        "    print('RAISED', exc)\n"
        "job = Job.objects.get()\n"
        "print('STATE', job.state, job.attempts)\n"
        "print('ERROR', job.error)\n"
    )
    result = manage(tmp_path, "shell", "-c", script, redis_url=dead_redis_url)
    assert "RAISED Cannot reach the Celery broker at redis://:***@127.0.0.1:" in result.stdout, result.stderr
    assert "STATE failed 0" in result.stdout  # never ran inline
    assert "ERROR Cannot reach the Celery broker" in result.stdout
    assert "hunter2" not in result.stdout + result.stderr


def test_unreachable_database_is_named_at_startup(tmp_path):
    env_url = f"postgres://nobody@127.0.0.1:{closed_port()}/nothing"
    env = os.environ | {"DATABASE_URL": env_url, "DATA_DIR": str(tmp_path), "REDIS_URL": ""}
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode != 0
    assert f"Cannot reach the database at {env_url}" in result.stderr
