"""Shared fixtures: users in every role of a project, API clients with tokens, the real model, a backend in its
place."""

import ast
import contextlib
import os
import sys
import time
import uuid
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from dataplatform.accounts import services as account_services
from dataplatform.accounts.models import Role

from . import backend_guard, written_tables
from .factories import MembershipFactory, ProjectFactory, UserFactory
from .s3_store import forget_export_storages
from .template_db import copy_migrated_sqlite, use_migrated_template

if os.environ.get("PYTEST_XDIST_WORKER") and "tests.parallel" not in sys.modules:
    # Without it the processes would share one Redis database, queue and DATA_DIR (see tests/parallel.py).
    pytest.exit("Run several test processes with bin/test, or add `-p tests.parallel` (with python -m pytest).",
                returncode=4)

written_tables.install()  # a transactional test's teardown empties the tables holding rows, not all of them


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    if os.environ.get("TEST_LANE") == "embedded":
        _keep_what_the_database_can_change(config, items)
    _refuse_twice_given_node_ids(items)
    _long_modules_first(items)


LONG_RUNNING = ("browser", "model", "integration")


def _long_modules_first(items):
    """The modules that start browsers, the real model, servers or workers go first, a module's tests kept
    together: pytest-xdist hands out whole modules in this order, so the run ends on short ones that even out
    the two processes, not on one long module while the other process waits."""
    long_running = {item.module.__name__ for item in items
                    if any(item.get_closest_marker(name) for name in LONG_RUNNING)}
    items.sort(key=lambda item: item.module.__name__ not in long_running)


def _refuse_twice_given_node_ids(items):
    """pytest-xdist (bin/test) keys the tests it hands out by node id: of two items with one id, it runs one."""
    seen = set()
    if twice := sorted({item.nodeid for item in items if item.nodeid in seen or seen.add(item.nodeid)}):
        raise pytest.UsageError(f"{len(twice)} node ids are given to more than one test, e.g. {twice[0]}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    """Before a transactional test's rows are removed, let other sessions on its database finish.

    Django empties the tables with one TRUNCATE of them all. A server or worker the test started may still
    be writing (a token's use is recorded after its response has gone out): the two then deadlock and
    PostgreSQL cancels the TRUNCATE, which fails the teardown. Bounded: a session still busy after
    OTHER_SESSIONS_WAIT is left to the TRUNCATE, which then waits for it as any lock does."""
    if _is_transactional(item):
        _wait_for_other_sessions()
    yield


OTHER_SESSIONS_WAIT = 3.0


def _is_transactional(item) -> bool:
    marker = item.get_closest_marker("django_db")
    fixtures = getattr(item, "fixturenames", ())
    return bool(marker and marker.kwargs.get("transaction")) or "transactional_db" in fixtures \
        or "live_server" in fixtures


def _wait_for_other_sessions() -> None:
    from django.db import connection

    if connection.vendor != "postgresql" or connection.connection is None or connection.in_atomic_block:
        return
    deadline = time.monotonic() + OTHER_SESSIONS_WAIT
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                           "AND pid <> pg_backend_pid() AND xact_start IS NOT NULL")
            if cursor.fetchone()[0] == 0:
                return
        time.sleep(0.02)


@pytest.fixture(scope="session", autouse=True)
def backend_guard_installed():
    """Every test runs under the guard: no model or tool call while the application holds a transaction."""
    with backend_guard.installed():
        yield


@pytest.fixture(autouse=True)
def no_backend_call_inside_a_transaction(backend_guard_installed):
    """Fail the test if a backend or tool call ran inside a transaction, even when its error was swallowed."""
    backend_guard.take()
    yield
    if caught := backend_guard.take():
        pytest.fail("\n".join(caught), pytrace=False)


@pytest.fixture
def project(db):
    return ProjectFactory(slug="alpha", name="Alpha")


@pytest.fixture
def other_project(db):
    return ProjectFactory(slug="beta", name="Beta")


@pytest.fixture
def members(project):
    """One user per role in `project`, keyed by role; plus 'outsider', a member of nothing."""
    users = {role.value: MembershipFactory(project=project, role=role, user=UserFactory(username=role.value)).user
             for role in Role}
    users["outsider"] = UserFactory(username="outsider")
    return users


def api_client_for(user, **token_options) -> APIClient:
    """An API client authenticated the way trainers are: with a personal token."""
    _, secret = account_services.issue_token(user=user, name="test", **token_options)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client


@pytest.fixture(scope="session")
def local_backend():
    """The real embedded model, loaded once for the whole session (the same instance get_backend() returns)."""
    from django.conf import settings

    from dataplatform.inference import get_backend

    assert settings.MODEL_BACKEND == "local", "the model tests run on the embedded local backend"
    backend = get_backend()
    assert backend.model is not None  # load now, so no test's timing includes it
    return backend


@pytest.fixture
def use_backend():
    """`use_backend(backend)` puts `backend` in the model's place until the test ends and returns it: every
    `dataplatform.inference.backend_for` answers it (`override_backend`), whatever the project or model. The one
    way a test replaces the model; a worker or server the test starts in another process does not see it."""
    from dataplatform.inference import override_backend

    with contextlib.ExitStack() as stack:
        yield lambda backend: stack.enter_context(override_backend(backend))


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    # The default PBKDF2 work factor costs ~0.3 s per user; tests create many users.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def no_build_ahead(settings):
    # A settle would send a build of stored export rows to the workers (exports/stored.py build_soon): a test
    # that means it turns it on; the others leave the broker's queue to their own jobs.
    settings.EXPORTS_BUILD_AHEAD = False


@pytest.fixture
def start_worker(tmp_path):
    """Start real Celery workers (with optional env overrides, and `include`: more modules for the worker
    to import, e.g. the test job kinds); they are stopped after the test."""
    from .worker import LiveWorker

    workers = []

    def start(*, include: tuple[str, ...] = (), **env_overrides: str) -> LiveWorker:
        worker = LiveWorker(tmp_path, env_overrides, include=include)
        workers.append(worker)
        worker.wait_ready()
        return worker

    yield start
    for worker in workers:
        worker.stop()


@pytest.fixture
def export_storage_in_tmp(settings, tmp_path):
    """Point DATA_DIR and the exports storage at a temporary folder (a live worker started later follows)."""
    settings.DATA_DIR = tmp_path
    files = {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path / "files")}}
    settings.STORAGES = {**settings.STORAGES, "exports": files, "exports-files": files}
    settings.EXPORTS_STORAGE_ALIAS = "exports-files"
    forget_export_storages()  # the handler caches backends; rebuild from the new settings
    yield tmp_path / "files"
    forget_export_storages()


@pytest.fixture(autouse=True)
def interface_language_restored():
    """Each test ends in the default language: a request in Chinese leaves its language active in the
    thread (Django's test client runs the view there), which would make the next test's English differ."""
    from django.conf import settings
    from django.utils import translation

    yield
    translation.activate(settings.LANGUAGE_CODE)


@pytest.fixture(autouse=True)
def fresh_auth_failure_counters(monkeypatch):
    """Each test starts with no failed log-ins or tokens counted against 127.0.0.1.

    The brute-force counters live in a cache that outlives a test and a run (Redis, or files under
    DATA_DIR), so without this the suite's own deliberate failures would add up to a lock-out."""
    from dataplatform.accounts import limiter

    run = uuid.uuid4().hex
    keys = limiter._keys
    monkeypatch.setattr(limiter, "_keys", lambda limit, subject: keys(limit, f"{run}|{subject}"))


# --- the suite on SQLite too (the embedded mode): see also the postgres_only marker below -------------

@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """On SQLite the test database is a file under DATA_DIR (one per test process), not Django's in-memory
    default: the live workers and servers the integration tests start are other processes, which must open
    the same database, as the embedded mode's web server and worker share its file. pytest-django would
    otherwise name it `test_<path>_gw0`, a path relative to the working directory."""
    from django.conf import settings

    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("postgresql") and not os.environ.get("TEST_MIGRATE_EACH"):
        use_migrated_template(database)
    if database["ENGINE"] == "dataplatform.sqlite3":
        name = Path(settings.DATA_DIR).resolve() / "test-db.sqlite3"
        database.setdefault("TEST", {})["NAME"] = str(name)
        # Django replaces an earlier run's file but not its WAL, which a connection still open at that run's end
        # (a server's, a request thread's) left behind: never let SQLite meet it beside a new file.
        for leftover in ("-wal", "-shm"):
            name.with_name(name.name + leftover).unlink(missing_ok=True)
        if not os.environ.get("TEST_MIGRATE_EACH"):
            copy_migrated_sqlite(name)
            _COPIED_FROM_TEMPLATE.append(name)


_COPIED_FROM_TEMPLATE: list[Path] = []


@pytest.fixture(scope="session")
def django_db_keepdb(request, django_db_modify_db_settings) -> bool:
    """Keep the SQLite file copied from the migrated template (Django would otherwise delete it and migrate a new
    one); pytest-django's --reuse-db as before."""
    return bool(request.config.getvalue("reuse_db") or _COPIED_FROM_TEMPLATE)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """`@pytest.mark.postgres_only("why")`: a test of something only PostgreSQL has (its pool, pg_sleep, a
    server restart...) is skipped on SQLite, before its fixtures, with its reason. Never for a SQLite defect."""
    if (marker := item.get_closest_marker("postgres_only")) is None:
        return
    if len(marker.args) != 1 or not str(marker.args[0]).strip():
        raise pytest.UsageError(f"{item.nodeid}: postgres_only needs its reason, e.g. postgres_only(\"pg_sleep\")")
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip(f"PostgreSQL only: {marker.args[0]}")


# --- the embedded lane (bin/test-embedded): what the database can change, run on SQLite -----------------

DATABASE_FIXTURES = {"db", "transactional_db", "live_server", "django_db_setup"}
NOT_IN_THE_EMBEDDED_LANE = {"model", "browser"}  # the marks whose tests it drops (bin/test-embedded: not browser)


def pytest_ignore_collect(collection_path, config):
    """In the embedded lane, a test module marked `model` or `browser` as a whole is not even imported: every
    test in it would be dropped (below, and bin/test-embedded's `-m "not browser"`), and importing the model's
    modules (torch, transformers, vLLM's protocol, TRL: ~10 s) would cost each test process for nothing."""
    if os.environ.get("TEST_LANE") != "embedded" or collection_path.suffix != ".py" \
            or not collection_path.name.startswith("test_"):
        return None
    return bool(module_marks(collection_path) & NOT_IN_THE_EMBEDDED_LANE) or None


def module_marks(path: Path) -> set[str]:
    """The marks a test module's `pytestmark` gives all its tests (`pytest.mark.NAME`, alone or listed, with or
    without arguments), read from its source without importing it."""
    for statement in ast.parse(path.read_bytes(), filename=str(path)).body:
        if isinstance(statement, ast.Assign) and any(getattr(target, "id", None) == "pytestmark"
                                                      for target in statement.targets):
            value = statement.value
            marks = value.elts if isinstance(value, ast.List | ast.Tuple) else [value]
            return {mark.func.attr if isinstance(mark, ast.Call) else mark.attr
                    for mark in marks if isinstance(getattr(mark, "func", mark), ast.Attribute)}
    return set()


def _keep_what_the_database_can_change(config, items):
    """TEST_LANE=embedded keeps the tests whose outcome the database can change: those that use the test
    database. A test that never opens it (a parser, a template filter, a subprocess with its own database) ran
    identically in the PostgreSQL lane. The real model's tests run there only too: their subject is the model,
    and what they store goes through the services that the tests with a backend double run here."""
    kept, dropped = [], []
    for item in items:
        uses_database = item.get_closest_marker("django_db") or DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
        (kept if uses_database and not item.get_closest_marker("model") else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
