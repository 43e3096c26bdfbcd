"""The database: PostgreSQL with a connection pool when DATABASE_URL names one, else the embedded SQLite file."""

import os

import dj_database_url

from .core import DATA_DIR
from .env import env_float, env_int, env_url

DATABASE_URL = env_url("DATABASE_URL", f"sqlite:///{DATA_DIR / 'db.sqlite3'}")
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
WEB_STATEMENT_TIMEOUT_SECONDS = env_float("WEB_STATEMENT_TIMEOUT_SECONDS", 5.0)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # psycopg 3 with a connection pool per process. Under ASGI every request runs in a thread
    # of its own, so persistent connections (CONN_MAX_AGE) are never reused there: each request
    # paid ~4 ms to connect and left an idle connection behind. The pool hands one out in ~0.1 ms
    # and caps what a process holds. DATABASE_POOL_MAX_SIZE bounds it; 0 turns the pool off.
    # A pooled connection is checked before it is handed out, so connections that a PostgreSQL restart
    # severed are replaced instead of failing the next request (dataplatform/postgresql: a look at the
    # socket, and a round trip only when the server has closed it or sent something). A request waits up to
    # DATABASE_POOL_TIMEOUT seconds for a connection (a restart takes a few), then gets a 503.
    pool_max = env_int("DATABASE_POOL_MAX_SIZE", 20)
    DATABASES["default"].setdefault("OPTIONS", {})["connect_timeout"] = 5
    if pool_max:
        DATABASES["default"]["CONN_MAX_AGE"] = 0  # the pool keeps the connections instead
        DATABASES["default"]["OPTIONS"]["pool"] = {
            "min_size": 1, "max_size": pool_max, "timeout": env_float("DATABASE_POOL_TIMEOUT", 5.0)}
        DATABASES["default"]["ENGINE"] = "dataplatform.postgresql"  # Django's, with that cheaper check
    # A ceiling for a web request's statements: a pathological filter answers a clear 503 after this many
    # seconds instead of holding a server thread and a connection (errors.py). The web server sets
    # DATAPLATFORM_PROCESS=web before the settings load (webserver.py); workers, commands and tests run
    # without it: an export or a migration may take longer. 0 turns it off. SQLite has no such setting.
    if os.environ.get("DATAPLATFORM_PROCESS") == "web" and WEB_STATEMENT_TIMEOUT_SECONDS > 0:
        DATABASES["default"]["OPTIONS"]["options"] = f"-c statement_timeout={round(WEB_STATEMENT_TIMEOUT_SECONDS * 1000)}"
elif DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # SQLite is shared by the web process and the worker: WAL lets reads run during writes,
    # IMMEDIATE transactions take the write lock up front (no upgrade deadlocks), and a
    # writer waits up to 20 s for the lock instead of failing at once.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    )
    DATABASES["default"]["ENGINE"] = "dataplatform.sqlite3"  # Django's, making the file's folder on connect
