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


def print_table(header: tuple[str, ...], rows: list[tuple[str, ...]], *, text_last: bool = True) -> None:
    """An aligned text table: the figure names left-aligned, the numbers right-aligned, and the last
    column left-aligned too when it is text (a target), as `text_last` says."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    last_number = len(header) - 1 if text_last else len(header)

    def line(cells: tuple[str, ...]) -> str:
        numbers = [cell.rjust(width) for cell, width in zip(cells[1:last_number], widths[1:last_number], strict=True)]
        text = [cells[-1].ljust(widths[-1])] if text_last else []
        return " | ".join([cells[0].ljust(widths[0]), *numbers, *text]).rstrip()

    print(line(header))
    print("-+-".join("-" * width for width in widths))
    for cells in rows:
        print(line(cells))


class RecordingBackend:
    """A backend that passes every call through and keeps those of `methods`, to replay them later on
    the bare backend: the "same calls made directly" baseline of a job's benchmark."""

    def __init__(self, backend, methods: tuple[str, ...]):
        self._backend = backend
        self._methods = methods
        self.calls: list[tuple[str, tuple, dict]] = []

    def __getattr__(self, name):
        attribute = getattr(self._backend, name)
        if name not in self._methods:
            return attribute

        def recorded(*args, **kwargs):
            self.calls.append((name, args, kwargs))
            return attribute(*args, **kwargs)
        return recorded

    def replay(self) -> None:
        for name, args, kwargs in self.calls:
            getattr(self._backend, name)(*args, **kwargs)
