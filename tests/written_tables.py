"""A transactional test ends by emptying the tables that hold rows, not every table of the project.

Django ends each TransactionTestCase (pytest-django's `transaction=True`, `transactional_db`, `live_server`) with
`flush`: a TRUNCATE of every table, then the post_migrate signal, which writes the content types and permissions
back. On PostgreSQL that costs ~0.2 s even when every table is empty (a truncated table and its indexes get new
files), and the suite has some 400 such tests in each lane. Here one query names the tables that hold rows, and
only those are emptied, with DELETE in one transaction (Django's foreign keys are deferred on both databases, so
the order does not matter). The content types and permissions, which only migrations write, are kept while they
number what they did after the first test; a test that changed them gets Django's own flush. Either way the test
database ends as Django's flush leaves it."""

from django.db import connections, transaction
from django.test import TransactionTestCase

KEPT = ("django_content_type", "auth_permission")  # post_migrate writes them; no test does

_django_fixture_teardown = TransactionTestCase._fixture_teardown
_kept_counts: dict[str, dict[str, int]] = {}  # database alias -> KEPT table -> rows after the first test


def _rows(connection) -> dict[str, int]:
    """Every table that holds rows -> 1 (the KEPT ones -> their row count), in one query."""
    quote = connection.ops.quote_name
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    parts = [f"SELECT %s, (SELECT count(*) FROM {quote(table)})" if table in KEPT
             else f"SELECT %s, 1 WHERE EXISTS (SELECT 1 FROM {quote(table)})" for table in tables]
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(parts), tables)
        return dict(cursor.fetchall())


def _empty_written_tables(alias: str) -> bool:
    """Delete the rows of every table that holds some; False (nothing done) when the KEPT tables changed."""
    connection = connections[alias]
    rows = _rows(connection)
    kept = {table: rows.pop(table, 0) for table in KEPT}
    if _kept_counts.setdefault(alias, kept) != kept:
        return False
    quote = connection.ops.quote_name
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")
        for table in rows:
            cursor.execute(f"DELETE FROM {quote(table)}")
    return True


def _fixture_teardown(self):
    if self.available_apps is not None or self.serialized_rollback:
        return _django_fixture_teardown(self)
    if not all(_empty_written_tables(alias) for alias in self._databases_names(include_mirrors=False)):
        _django_fixture_teardown(self)


def install() -> None:
    TransactionTestCase._fixture_teardown = _fixture_teardown
