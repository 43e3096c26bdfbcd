"""Helpers shared by the benchmark scripts (run as scripts, so bench/ is on sys.path)."""

import psycopg2


def ensure_database(server_url: str, name: str) -> None:
    """Create the benchmark's own PostgreSQL database if it does not exist yet."""
    admin = psycopg2.connect(f"{server_url}/postgres")
    admin.autocommit = True  # CREATE DATABASE cannot run in a transaction block
    try:
        with admin.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
            if cursor.fetchone() is None:
                cursor.execute(f'CREATE DATABASE "{name}"')
                print(f"created database {name}")
    finally:
        admin.close()
