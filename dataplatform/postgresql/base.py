"""Django's PostgreSQL backend, with a cheaper check of a pooled connection before it is handed out.

psycopg_pool's own check (what Django's CONN_HEALTH_CHECKS gives a pool) sends an empty query and
waits for the answer: one more round trip on every request. Under load that round trip costs more than
it looks: the thread gives up the GIL while it waits and then queues to get it back behind the other
threads of the process (py-spy put about 9% of the web workers' request samples there during the load
bench).

A connection idle in the pool has nothing to read unless the server sent something on its own: the
error and end-of-file of a terminated backend (a restart, pg_terminate_backend, an idle timeout) or a
notice. So `check_pooled_connection` looks at the socket without waiting (`select`, zero timeout) and
runs the full check only when something is there; that check then fails and the pool takes a new
connection. A path that died without the server closing it (a cable, not a restart) is not seen here:
the query on it fails, the request gets PlatformErrorMiddleware's 503, and the pool drops the
broken connection.
"""

import select

from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool


def check_pooled_connection(conn) -> None:
    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    if readable:
        ConnectionPool.check_connection(conn)


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self):
        pool = super().pool
        # Django passes the pool psycopg_pool's check or none, and has no option for another one.
        if pool is not None and pool._check is not check_pooled_connection:
            pool._check = check_pooled_connection
        return pool
