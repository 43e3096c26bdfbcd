"""Django's SQLite backend, making the database file's folder before it connects, with the SQL functions the
platform adds to SQLite.

SQLite creates a missing database file but not its folder, and the embedded default file is
DATA_DIR/db.sqlite3, a folder that importing the settings does not create (dataplatform/settings).
"""

import hashlib
from pathlib import Path

from django.db.backends.sqlite3 import base


def text_hash(text: str | None) -> int | None:
    """`TextHash` on SQLite (dataplatform/dbfunctions.py): a signed 32-bit hash of a text."""
    if text is None:
        return None
    return int.from_bytes(hashlib.blake2b(str(text).encode(), digest_size=4).digest(), "big", signed=True)


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params):
        if not self.is_in_memory_db():
            Path(conn_params["database"]).parent.mkdir(parents=True, exist_ok=True)
        connection = super().get_new_connection(conn_params)
        connection.create_function("text_hash", 1, text_hash, deterministic=True)
        return connection
