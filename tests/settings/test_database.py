"""The database settings: the web process's statement timeout (settings/database.py)."""

import os
import subprocess
import sys

from django.conf import settings


def test_the_web_servers_database_connections_have_a_statement_timeout_and_nothing_else_does():
    """`python -m dataplatform.webserver` marks its processes before the settings load (settings/database.py);
    a worker or a command, started without it, may run a statement as long as it needs."""
    show = ("from django.conf import settings; "
            "print(settings.DATABASES['default'].get('OPTIONS', {}).get('options'))")
    serve = ("import uvicorn; uvicorn.run = lambda *args, **kwargs: None; "
             "from dataplatform import webserver; webserver.main(['--port', '0']); " + show)
    environment = {**os.environ, "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/any",
                   "WEB_STATEMENT_TIMEOUT_SECONDS": "2.5", "DJANGO_SETTINGS_MODULE": "dataplatform.settings"}
    environment.pop("DATAPLATFORM_PROCESS", None)

    def run(code: str) -> str:
        return subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True,
                              check=True, cwd=settings.BASE_DIR).stdout.strip().splitlines()[-1]

    assert run(serve) == "-c statement_timeout=2500"
    assert run(show) == "None"
