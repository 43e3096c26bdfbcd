"""The pool's check of a connection before it is handed out (dataplatform/postgresql/base.py)."""

import time

import psycopg
import pytest
from django.db import connection
from psycopg_pool import ConnectionPool

from dataplatform.postgresql.base import check_pooled_connection

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.postgres_only("psycopg's connection pool: SQLite keeps one connection per thread")]


@pytest.fixture
def pool():
    if connection.vendor != "postgresql" or connection.pool is None:
        pytest.fail("This test needs PostgreSQL with the pool: set DATABASE_URL=postgres://... (bin/test does).")
    return connection.pool


@pytest.fixture
def full_checks(monkeypatch):
    calls = []
    full_check = ConnectionPool.check_connection
    monkeypatch.setattr(ConnectionPool, "check_connection",
                        staticmethod(lambda conn: calls.append(conn) or full_check(conn)))
    return calls


def _terminate(pid: int) -> None:
    settings = connection.settings_dict
    with psycopg.connect(host=settings["HOST"] or "127.0.0.1", port=settings["PORT"] or 5432, user=settings["USER"],
                         dbname="postgres", autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone()[0]


def test_the_pool_uses_our_check(pool):
    assert pool._check is check_pooled_connection


def test_a_healthy_connection_is_handed_out_without_a_round_trip(pool, full_checks):
    conn = pool.getconn()
    pool.putconn(conn)
    again = pool.getconn()
    try:
        assert again.execute("SELECT 1").fetchone() == (1,)
    finally:
        pool.putconn(again)
    assert full_checks == []


def test_a_connection_the_server_closed_is_replaced_before_it_is_handed_out(pool, full_checks):
    conn = pool.getconn()
    pid = conn.info.backend_pid
    pool.putconn(conn)
    _terminate(pid)  # what a restart does to every connection the app holds
    time.sleep(0.2)  # the server's goodbye reaches the socket
    handed_out = []
    try:
        while not handed_out or pool.get_stats().get("pool_available"):  # every connection the pool holds
            handed_out.append(pool.getconn(timeout=5))
            assert handed_out[-1].execute("SELECT 1").fetchone() == (1,)  # never the dead one
    finally:
        for fresh in handed_out:
            pool.putconn(fresh)
    assert pid not in {fresh.info.backend_pid for fresh in handed_out}
    assert len(full_checks) == 1  # the one connection with something to read got the round trip, and failed it
