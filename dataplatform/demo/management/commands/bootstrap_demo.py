"""Create the demo admin user and demo project for the embedded mode, and fill it (idempotent).

The password is generated on first run and kept in DATA_DIR/demo-login.txt
(mode 600) so that every `make run` can print the same login.

The project gets sample data in every workflow and one `demo.seed` job that runs their model jobs
(dataplatform/demo/); a second run finds them and queues nothing. `--no-data`: the login and an empty
project only. bin/run sets RUN_STARTED_AT (Unix time) so that the worker's "Demo ready" line counts from
`make run`'s start rather than this command's, and RUN_URL (where its web server listens: HOST and PORT) for
the links printed.
"""

import os
import secrets
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from django.urls import reverse

from dataplatform.accounts import services
from dataplatform.accounts.models import Project, Role
from dataplatform.demo.parts import prepare_demo, summary_lines

DEMO_USER = "admin"
DEMO_PROJECT = "demo"


class Command(BaseCommand):
    help = "Create the demo admin user and demo project if missing, fill it with sample data, and print the login."

    def add_arguments(self, parser):
        parser.add_argument("--no-data", action="store_true", help="only the login and an empty demo project")

    def handle(self, *args, **options):
        began = time.monotonic()
        run_started_at = _run_started_at()
        started_at, since = (run_started_at, "make run") if run_started_at else (time.time(), "bootstrap_demo")
        login_file = settings.DATA_DIR / "demo-login.txt"
        User = get_user_model()
        with transaction.atomic():
            user = User.objects.filter(username=DEMO_USER).first()
            if user is None or not login_file.exists():
                password = secrets.token_urlsafe(9)
                if user is None:
                    user = User.objects.create_superuser(DEMO_USER, email="", password=password)
                else:
                    user.set_password(password)
                    user.save(update_fields=["password"])
                login_file.parent.mkdir(parents=True, exist_ok=True)  # DATA_DIR: the settings do not make it
                login_file.write_text(password + "\n")
                os.chmod(login_file, 0o600)
            password = login_file.read_text().strip()
            project = Project.objects.filter(slug=DEMO_PROJECT).first()
            if project is None:
                project = services.create_project(
                    slug=DEMO_PROJECT, name="Demo project",
                    description="Created by `make run` for trying the platform on the embedded model.",
                )
            services.set_membership(project=project, user=user, role=Role.ADMIN)
        if not options["no_data"]:
            self._fill(project, user, started_at, since, began)
        self.stdout.write(self.style.SUCCESS(f"Log in at {_site()}/ as '{DEMO_USER}' with password '{password}'"))

    def _fill(self, project, user, started_at: float, since: str, began: float) -> None:
        prepared = prepare_demo(project=project, user=user, started_at=started_at, since=since)
        for line in summary_lines(project):
            self.stdout.write(f"  {line}")
        seed = prepared.seed
        if not prepared.queued:
            self.stdout.write(f"Demo data already there; its seed job {seed.pk} is {seed.state}: {_link(seed)}")
            return
        jobs = ", ".join(f"{job.pk} {job.kind}" for job in prepared.jobs) or "none left"
        self.stdout.write(f"Demo data imported in {time.monotonic() - began:.1f} s. Queued job {seed.pk} "
                          f"({seed.kind}: {_link(seed)}) to run the model's work: {jobs}; the worker logs "
                          "\"Demo ready\" when all of it is done.")


SITE = "http://127.0.0.1:8000"  # bin/run's web server, unless HOST or PORT say otherwise (RUN_URL)


def _site() -> str:
    return (os.environ.get("RUN_URL") or SITE).rstrip("/")


def _link(job) -> str:
    return _site() + reverse("job-detail", args=[job.pk])


def _run_started_at() -> float | None:
    """When `make run` started (bin/run exports RUN_STARTED_AT), if it did and it is a plausible time."""
    try:
        value = float(os.environ.get("RUN_STARTED_AT", ""))
    except ValueError:
        return None
    return value if 0 < time.time() - value < 3600 else None
