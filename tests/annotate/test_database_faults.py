"""PostgreSQL goes away while an annotator saves: what was committed stays, the save in flight is a
503 that says nothing was saved, and the same save succeeds once the database is back.

The restart is simulated on the test database alone, so the shared server keeps serving others:
every connection the app holds is terminated (what a restart does to them), and new connections are
refused until the "restart" ends (ALLOW_CONNECTIONS false, as during start-up)."""

import contextlib
import time

import httpx
import psycopg
import pytest
from django.db import OperationalError, connection

from annotate.models import Event, Node, SessionStatus
from dataplatform.accounts import services as account_services

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True),
              pytest.mark.postgres_only("a database server restarting: SQLite is a file, with no server to lose")]


@pytest.fixture(autouse=True)
def fresh_connection_pool(transactional_db):
    """Each test starts with a new connection pool, as a process has after it starts, rather than the one the
    earlier tests filled: after the restart every idle connection in it is broken, and psycopg_pool finds
    them one at a time, backing off (1 s, 2 s, 4 s) between two broken ones, so with the 20 a burst of
    requests leaves it took ~20 s more before a connection was handed out again (the same checks, only more)."""
    connection.close()
    connection.close_pool()


@contextlib.contextmanager
def database_down():
    """From a connection to another database (PostgreSQL will not lock out the current one)."""
    settings = connection.settings_dict
    name = settings["NAME"]
    admin = psycopg.connect(host=settings["HOST"] or "127.0.0.1", port=settings["PORT"] or 5432,
                            user=settings["USER"], password=settings["PASSWORD"] or None, dbname="postgres",
                            autocommit=True)
    try:
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", [name])
        yield
    finally:
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
        admin.close()
        wait_until_the_pool_reconnects()


def wait_until_the_pool_reconnects(timeout: float = 60) -> None:
    """After an outage psycopg_pool reconnects with backoff: like a client honouring Retry-After, wait
    until a connection is handed out again (the test's own connection was severed too)."""
    deadline = time.monotonic() + timeout
    while True:
        connection.close()
        try:
            connection.ensure_connection()
            return
        except OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_a_save_during_a_database_restart_is_refused_cleanly_and_succeeds_after(session, members, live_server):
    _, secret = account_services.issue_token(user=members["annotator"], name="faults")
    api = httpx.Client(base_url=live_server.url, headers={"Authorization": f"Token {secret}"}, timeout=30)
    root = session.current_node
    # The annotator forces the end after three tokens (a correction, committed), then accepts.
    first = api.post(f"/api/v1/sessions/{session.pk}/correct/",
                     json={"version": 0, "node_id": root.pk, "position": 3, "stop": True})
    assert first.status_code == 201, first.text
    kept = Node.objects.get(pk=first.json()["id"]).token_ids

    with database_down():
        refused = api.post(f"/api/v1/sessions/{session.pk}/accept/", json={"version": 1})
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "5"
    assert "nothing from this request was saved" in refused.json()["detail"]

    # Back up: the committed correction is intact and nothing of the refused accept was written.
    session.refresh_from_db()
    assert (session.version, session.status) == (1, SessionStatus.OPEN)
    events_before = Event.objects.filter(session=session).count()
    retried = api.post(f"/api/v1/sessions/{session.pk}/accept/", json={"version": 1})
    assert retried.status_code == 200, retried.text  # the pool replaced its severed connections
    session.refresh_from_db()
    assert (session.version, session.status) == (2, SessionStatus.ACCEPTED)
    assert Event.objects.filter(session=session).count() == events_before + 1
    assert Node.objects.get(pk=first.json()["id"]).token_ids == kept == [10, 11, 12]


def test_a_page_during_a_database_restart_says_what_happened(members, client, live_server):
    browser = httpx.Client(base_url=live_server.url, timeout=30)
    client.force_login(members["annotator"])
    browser.cookies.set("sessionid", client.cookies["sessionid"].value)
    assert browser.get("/").status_code == 200
    with database_down():
        page = browser.get("/")
    assert page.status_code == 503 and "nothing from this request was saved" in page.text
    assert browser.get("/").status_code == 200
