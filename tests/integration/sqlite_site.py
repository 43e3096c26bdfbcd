"""The embedded mode's database beside any test database: a SQLite file of its own, migrated, seeded and checked
by one helper process that is configured as `bin/run` configures the embedded mode (DATABASE_URL=sqlite:///...,
no REDIS_URL: the filesystem broker under DATA_DIR).

Why a process and not a second database alias: the test process's Django is bound to the suite's database
(PostgreSQL under bin/test, or the suite's own SQLite test file), and the code under test writes through the
default connection (dataplatform/claims.py's raw SQL, the services, the factories, tests/claim_invariants).
In a process started with the embedded environment, the SQLite file *is* the default database, so the same
code seeds and checks it, and nothing in the test process is rebound or left to pytest-django's flush.

The process is spawned (not forked: the test process's Django and connections must not be inherited), and
this module is what it imports before Django is set up, so everything Django is imported inside the functions.
"""

import concurrent.futures
import multiprocessing
import os
import secrets

SETTINGS = "dataplatform.settings"
CALL_TIMEOUT = 120.0  # the first call migrates a new file: ~6 s of CPU, longer on a busy machine


def embedded_env(data_dir, **overrides: str) -> dict[str, str]:
    """This process's environment as the embedded mode would have it in `data_dir`: the SQLite file there,
    the filesystem broker there, no object store."""
    env = {name: value for name, value in os.environ.items()
           if name not in {"DATABASE_URL", "REDIS_URL", "EXPORTS_S3_BUCKET", "PYTEST_XDIST_WORKER"}}
    return env | {"DJANGO_SETTINGS_MODULE": SETTINGS, "DATA_DIR": str(data_dir),
                  "DATABASE_URL": f"sqlite:///{data_dir}/db.sqlite3", "REDIS_URL": ""} | overrides


class Site:
    """One helper process on the embedded database; `call(function, ...)` runs a function of this module there."""

    def __init__(self, env: dict[str, str]):
        self._pool = concurrent.futures.ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context("spawn"), initializer=_start, initargs=(env,))

    def submit(self, function, *args, **kwargs) -> concurrent.futures.Future:
        return self._pool.submit(function, *args, **kwargs)

    def call(self, function, *args, **kwargs):
        return self.submit(function, *args, **kwargs).result(timeout=CALL_TIMEOUT)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


# --- run in the helper process ------------------------------------------------------------------------------

def _start(env: dict[str, str]) -> None:
    os.environ.clear()
    os.environ.update(env)
    import django

    django.setup()
    from django.conf import settings

    # The factories set a password per user; PBKDF2's work factor would cost ~0.3 s each (as tests/conftest.py).
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def migrate() -> dict:
    """Migrate the file as `bin/run` does; what the connection is, to show it is the embedded one."""
    from django.core.management import call_command
    from django.db import connection

    with connection.cursor() as cursor:
        # A new file that nothing else uses yet: its migrations need not wait for each commit to reach the disk
        # (a third of their time on a busy machine). This connection only; the servers' keep the setting's own.
        cursor.execute("PRAGMA synchronous = OFF")
    call_command("migrate", interactive=False, verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA synchronous = FULL")
        cursor.execute("PRAGMA journal_mode")
        journal_mode = cursor.fetchone()[0]
    return {"vendor": connection.vendor, "name": str(connection.settings_dict["NAME"]), "journal_mode": journal_mode,
            "timeout": float(connection.settings_dict["OPTIONS"]["timeout"])}


def make_queue(*, items: int, overlap: int) -> str:
    """An onPanda project with `items` answered items; its slug."""
    from annotate import services
    from annotate.models import Item
    from tests.annotate.conftest import fake_rollout
    from tests.factories import ProjectFactory

    project = ProjectFactory(slug=f"races-{secrets.token_hex(3)}")
    Item.objects.bulk_create(
        Item(project=project, messages=[{"role": "user", "content": f"q{n}"}], prompt_ids=[1, 2],
             source_sha256=f"{n:064d}", rollout=fake_rollout([10, 11, 12])) for n in range(items))
    config = services.config_for(project)
    config.overlap, config.lease_minutes = overlap, 30
    config.save()
    return project.slug


def make_annotators(slug: str, count: int, prefix: str) -> list[tuple[int, str]]:
    """`count` annotators of the project, each with an API token: (user id, token)."""
    from dataplatform.accounts import services as account_services
    from dataplatform.accounts.models import Project
    from tests.factories import MembershipFactory, UserFactory

    project = Project.objects.get(slug=slug)
    people = []
    for n in range(count):
        user = UserFactory(username=f"{prefix}-{n}-{secrets.token_hex(2)}")
        MembershipFactory(project=project, user=user, role="annotator")
        people.append((user.pk, account_services.issue_token(user=user, name="race")[1]))
    return people


def expire_leases(slug: str) -> int:
    from datetime import timedelta

    from django.utils import timezone

    from annotate.models import Claim

    return Claim.objects.filter(project__slug=slug).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def violations(slug: str, overlap: int) -> dict[str, list]:
    from annotate.models import Claim
    from dataplatform.accounts.models import Project
    from tests import claim_invariants

    return claim_invariants.violations(Claim, item_field="item", holder_field="annotator",
                                       project_id=Project.objects.get(slug=slug).pk, overlap=overlap)


def claims_in_state(slug: str, state: str) -> int:
    from annotate.models import Claim

    return Claim.objects.filter(project__slug=slug, state=state).count()


def claim_ids_of(user_id: int) -> set[int]:
    from annotate.models import Claim

    return set(Claim.objects.filter(annotator_id=user_id).values_list("pk", flat=True))


def claims_with_sessions(slug: str, user_ids: list[int]) -> list[tuple[int, int, int]]:
    """Each user claims through the service: (claim id, session id, session version)."""
    from django.contrib.auth import get_user_model

    from annotate import services
    from dataplatform.accounts.models import Project

    project = Project.objects.get(slug=slug)
    claims = [services.claim_with_session(project=project, annotator=get_user_model().objects.get(pk=user_id))
              for user_id in user_ids]
    return [(claim.pk, claim.session.pk, claim.session.version) for claim in claims]


def decisions(claim_ids: list[int]) -> list[tuple[str, str]]:
    """(claim state, session status) of each claim."""
    from annotate.models import Claim

    claims = Claim.objects.in_bulk(claim_ids)
    return [(claims[pk].state, claims[pk].session.status) for pk in claim_ids]


def enqueue_count(slug: str, to: int) -> int:
    """A job that writes its progress `to` times (tests/jobs/kinds.py), sent to the worker; its id."""
    from dataplatform.accounts.models import Project
    from dataplatform.jobs.services import enqueue_job
    from tests.factories import UserFactory
    from tests.jobs import kinds  # noqa: F401 (registers test.count here too, as --include does in the worker)

    project = Project.objects.get(slug=slug)
    user = UserFactory(username=f"jobs-{secrets.token_hex(3)}")
    return enqueue_job(project=project, kind="test.count", params={"to": to}, user=user).pk


def stop_job(job_id: int) -> None:
    """Ask a running job to stop at its next progress write (or cancel it if it is still queued)."""
    from dataplatform.jobs.models import Job
    from dataplatform.jobs.services import cancel_job

    cancel_job(job=Job.objects.get(pk=job_id))


def job_state(job_id: int) -> tuple[str, int, str]:
    """(state, progress done, error) of a job."""
    from dataplatform.jobs.models import Job

    job = Job.objects.get(pk=job_id)
    return job.state, job.progress_done, job.error or ""
