"""`python -m dataplatform.webserver --reload` (bin/run with RELOAD=1): which files restart the server, and where
it looks for them."""

import os
from pathlib import Path

import pytest
from django.conf import settings
from uvicorn import Config

from dataplatform import webserver


def test_the_watched_folders_are_the_projects_own():
    watched = webserver.source_dirs()
    base = Path(settings.BASE_DIR)
    assert {base / name for name in ("dataplatform", "annotate", "labeler", "corpora", "frontend", "locale")} <= set(
        watched)
    # Not the installed packages, nor what the platform writes (a changed SQLite file must not restart it).
    assert all(base / ".venv" not in (path, *path.parents) for path in watched)
    data_dir = Path(settings.DATA_DIR)
    assert all(path not in (data_dir, *data_dir.parents) and data_dir not in path.parents for path in watched)


def test_code_templates_and_catalogs_are_watched_installed_packages_are_not(tmp_path):
    for name in ("app/views.py", "app/templates/app/page.html", "app/locale/zh_Hans/LC_MESSAGES/django.mo",
                 "app/static/app/app.css", "app/__pycache__/views.cpython-311.pyc", "app/.hidden/secret.py",
                 "frontend/node_modules/htmx.org/dist/build.py", "app/locale/zh_Hans/LC_MESSAGES/django.po"):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    reloader = webserver.SourceReload(Config("dataplatform.asgi:application", reload=True, reload_dirs=[str(tmp_path)]),
                                      target=lambda sockets: None, sockets=[])
    watched = {path.relative_to(tmp_path).as_posix() for path in reloader.iter_py_files()}
    assert watched == {"app/views.py", "app/templates/app/page.html", "app/locale/zh_Hans/LC_MESSAGES/django.mo"}

    # A change to one of them is what uvicorn's loop restarts on (the first look only records the times).
    reloader.pause = lambda: None  # no waiting between looks
    assert reloader.should_restart() is None
    page = tmp_path / "app/templates/app/page.html"
    later = page.stat().st_mtime + 5
    os.utime(page, (later, later))
    assert reloader.should_restart() == [page]


def test_reload_runs_one_process():
    with pytest.raises(SystemExit):
        webserver.main(["--reload", "--workers", "2"])
