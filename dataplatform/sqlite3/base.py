"""Django's SQLite backend, making the database file's folder before it connects.

SQLite creates a missing database file but not its folder, and the embedded default file is
DATA_DIR/db.sqlite3, a folder that importing the settings does not create (dataplatform/settings).
"""

from pathlib import Path

from django.db.backends.sqlite3 import base


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params):
        if not self.is_in_memory_db():
            Path(conn_params["database"]).parent.mkdir(parents=True, exist_ok=True)
        return super().get_new_connection(conn_params)
