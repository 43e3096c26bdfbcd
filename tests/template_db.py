"""One migrated database per set of migrations, which every test process's database is copied from.

Each test process (pytest-xdist's `gw0`, `gw1`...) used to migrate its own test database from empty: a minute or
more each on 2 busy cores, the largest fixed cost of a run. Now the first process to get here migrates a template
once (in a subprocess, `manage.py migrate` on a database of its own), and every process's test database is created
from it (`TEST["TEMPLATE"]`, which Django passes to `CREATE DATABASE ... TEMPLATE`); Django's own migrate then finds
nothing left to apply. The template is named by a digest of every migration file and the Django version, so a
changed migration makes a new one; the older templates of the same database name are dropped then. It is kept
between runs (a rerun skips the migrate) and is never connected to once built, as `CREATE DATABASE` requires.
On SQLite the template is a file, copied to each process's database file, which the run then keeps as it is
(pytest-django's keepdb: Django's migrate finds it up to date)."""

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import django
import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
LOCK_FILE = ROOT / "var" / "test-template.lock"


def migrations_digest() -> str:
    digest = hashlib.sha256(django.get_version().encode())
    for path in sorted(ROOT.glob("**/migrations/*.py")):
        if ".venv" in path.parts or "node_modules" in path.parts:
            continue
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def template_name(database_name: str) -> str:
    return f"tpl_{database_name[:40]}_{migrations_digest()}"  # within PostgreSQL's 63 characters


def use_migrated_template(database: dict) -> None:
    """Point `database` (a DATABASES entry on PostgreSQL) at a migrated template, building it first if needed."""
    name = template_name(database["NAME"])
    connect = {"host": database.get("HOST") or None, "port": database.get("PORT") or None,
               "user": database.get("USER") or None, "password": database.get("PASSWORD") or None,
               "dbname": "postgres", "autocommit": True}
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK_FILE, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder; the other processes wait here, then find it built
        with psycopg.connect(**connect) as admin:
            existing = {row[0] for row in admin.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE %s", [f"tpl_{database['NAME'][:40]}_%"])}
            if name not in existing:
                _build(admin, name, database)
                for stale in existing - {name}:
                    admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(stale)))
    database.setdefault("TEST", {})["TEMPLATE"] = name


def copy_migrated_sqlite(target: Path) -> None:
    """Copy a migrated SQLite template to `target` (a process's test database file), building it first if needed."""
    template = LOCK_FILE.parent / f"test-template-{migrations_digest()}.sqlite3"
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK_FILE, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not template.exists():
            for stale in LOCK_FILE.parent.glob("test-template-*.sqlite3*"):
                stale.unlink()
            building = template.with_name(template.name + ".new")
            building.unlink(missing_ok=True)
            subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "--skip-checks", "-v", "0"],
                           cwd=ROOT, env={**os.environ, "DATABASE_URL": f"sqlite:///{building}"}, check=True)
            building.rename(template)  # the migrate closed it: no WAL is left beside it
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, target)


def _build(admin, name: str, database: dict) -> None:
    building = f"{name}_new"
    admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(building)))
    admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(building)))
    url = urlsplit(os.environ["DATABASE_URL"])._replace(path=f"/{building}").geturl()
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "--skip-checks", "-v", "0"],
                       cwd=ROOT, env={**os.environ, "DATABASE_URL": url}, check=True)
    except BaseException:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(building)))
        raise
    # Renamed only once whole: a run stopped halfway never leaves a template that looks ready.
    admin.execute(sql.SQL("ALTER DATABASE {} RENAME TO {}").format(sql.Identifier(building), sql.Identifier(name)))
