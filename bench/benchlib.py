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
