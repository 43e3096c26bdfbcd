"""The demo's command: `manage.py bootstrap_demo` (dataplatform/demo/management/commands/bootstrap_demo.py)."""

import io

import pytest
from django.core.management import call_command

from dataplatform.accounts.models import Project
from dataplatform.jobs.models import Job

pytestmark = pytest.mark.django_db


def test_bootstrap_demo_is_idempotent(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    first, second = io.StringIO(), io.StringIO()
    call_command("bootstrap_demo", stdout=first)
    jobs = Job.objects.count()
    call_command("bootstrap_demo", stdout=second)
    login = first.getvalue().splitlines()[-1]
    assert login.startswith("Log in at") and second.getvalue().splitlines()[-1] == login  # the same password
    assert "Queued job" in first.getvalue() and "Demo data already there" in second.getvalue()
    assert Project.objects.filter(slug="demo").count() == 1
    assert Job.objects.count() == jobs  # the demo's jobs are queued once (tests/demo/test_bootstrap.py)
    password = (tmp_path / "demo-login.txt").read_text().strip()
    from django.contrib.auth import authenticate

    assert authenticate(username="admin", password=password) is not None
