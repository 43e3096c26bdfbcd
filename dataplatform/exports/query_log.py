"""An export, or a build of stored rows, forgets the SQL Django logged for it as it goes, when DEBUG is on.

With DEBUG on (the embedded mode's default, `make run`), Django keeps the SQL of every query in its connection, up
to 9,000 of them, for as long as the process runs a job: a stored kind's build inserts pages of rows in statements
of ~200 KB, and a catch-up build of 78k onPanda sessions took an export's worker to 466 MB, 603 MB by the end of
its 100k rows (210 and 238 MB with DEBUG off, bench/kinds_bench.py). A log someone asked for is kept: Django's
`CaptureQueriesContext` (the tests' query counts) forces a debug cursor, which this leaves alone."""

from django.conf import settings
from django.db import connections


def forget_logged_queries() -> None:
    """Drop the SQL logged so far by connections that log only because DEBUG is on."""
    if not settings.DEBUG:
        return
    for connection in connections.all(initialized_only=True):
        if not connection.force_debug_cursor:
            connection.queries_log.clear()
