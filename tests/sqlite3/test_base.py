"""The SQLite backend (dataplatform/sqlite3) makes its file's folder: the settings no longer make DATA_DIR."""

from django.db.utils import ConnectionHandler


def connect(name: str) -> None:
    connection = ConnectionHandler({"default": {"ENGINE": "dataplatform.sqlite3", "NAME": name}})["default"]
    connection.ensure_connection()
    connection.close()


def test_the_database_file_folder_is_made_on_connect(tmp_path, django_db_blocker):
    database = tmp_path / "not" / "yet" / "db.sqlite3"
    with django_db_blocker.unblock():
        connect(str(database))
    assert database.is_file()


def test_an_in_memory_database_makes_no_folder(tmp_path, monkeypatch, django_db_blocker):
    monkeypatch.chdir(tmp_path)
    with django_db_blocker.unblock():
        connect(":memory:")
    assert list(tmp_path.iterdir()) == []
