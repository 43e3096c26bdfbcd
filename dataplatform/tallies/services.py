"""Writes of kept figures: `start_new_project` when a project is made (its figures are all zero, so they are kept
from then on), `add` in the transaction of the change it counts, `count_now` for a project made before a tally
existed (the `tallies.count` job after migrate, or the first read) and for repairs."""

from collections.abc import Mapping

from django.db import connection, transaction

from .models import Tally, TallyStart
from .registry import Figure, defined, definition


def start_new_project(project_id: int) -> None:
    """Mark every tally of a project just made as counted: with no rows yet, each is all zero, and `add` keeps it
    from the project's first change. (Counting a tally on its first read took 35 s for 1M onPanda sessions, more
    than the web's statement timeout.) A tally defined later is counted by the `tallies.count` job."""
    TallyStart.objects.bulk_create([TallyStart(project_id=project_id, name=tally.name) for tally in defined()],
                                   ignore_conflicts=True)


def uncounted(project_id: int) -> list[str]:
    """The names of the project's tallies never counted."""
    started = set(TallyStart.objects.filter(project_id=project_id).values_list("name", flat=True))
    return [tally.name for tally in defined() if tally.name not in started]


def add(project_id: int, name: str, changes: Mapping[str, int | Figure]) -> None:
    """Add `changes` ({key: count delta, or Figure(count delta, total delta)}) to a project's tally.

    Call it inside the transaction of the change, after the change is written: until the tally is first counted
    it does nothing, and the first count (which waits for this transaction) sees the change itself."""
    rows = sorted((key, *(change if isinstance(change, Figure) else Figure(change)))
                  for key, change in changes.items())
    rows = [row for row in rows if row[1] or row[2]]
    if not rows or not TallyStart.objects.filter(project_id=project_id, name=name).exists():
        return
    table = connection.ops.quote_name(Tally._meta.db_table)
    values = ", ".join(["(%s, %s, %s, %s, %s)"] * len(rows))
    params = [value for key, count, total in rows for value in (project_id, name, key, count, float(total))]
    # Sorted keys: two transactions adding to the same keys lock them in the same order (no deadlock).
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (project_id, name, key, count, total) VALUES {values} "
            f"ON CONFLICT (project_id, name, key) DO UPDATE "
            f"SET count = {table}.count + excluded.count, total = {table}.total + excluded.total", params)


def count_now(project_id: int, name: str, *, again: bool = False) -> None:
    """Count a project's tally from scratch and mark it counted; with `again`, also a tally counted before
    (a repair). Writers to the tally's tables wait during the count (SQLite: every write transaction does)."""
    tally = definition(name)
    with transaction.atomic():
        if connection.vendor == "postgresql":
            tables = ", ".join(connection.ops.quote_name(model._meta.db_table) for model in tally.tables)
            with connection.cursor() as cursor:
                cursor.execute(f"LOCK TABLE {tables} IN SHARE MODE")
        if not again and TallyStart.objects.filter(project_id=project_id, name=name).exists():
            return  # counted by another request while this one waited for the lock
        figures = tally.recount(project_id)
        Tally.objects.filter(project_id=project_id, name=name).delete()
        Tally.objects.bulk_create(Tally(project_id=project_id, name=name, key=key, count=figure.count,
                                        total=figure.total) for key, figure in figures.items() if figure.count)
        TallyStart.objects.update_or_create(project_id=project_id, name=name)
