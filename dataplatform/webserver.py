"""Start the web server: uvicorn serving dataplatform.asgi:application, believing proxy headers only
from the addresses in the TRUSTED_PROXIES setting.

    python -m dataplatform.webserver --host 0.0.0.0 --port 8000 --workers 4

Production starts the web app this way and no other (the Dockerfile, docker-compose.yml, `make run`'s
bin/run, and bench/benchlib.py for the benchmarks and tests). `--reload` (development: bin/run with
RELOAD=1) restarts the one server process when the project's code, a template or a compiled catalog
changes. Plain `uvicorn dataplatform.asgi:application` applies
X-Forwarded-For and X-Forwarded-Proto from 127.0.0.1 (or FORWARDED_ALLOW_IPS) by default, so anything
on the host could name its own client address, a new one per request to escape the brute-force limits
and put a forged address in the audit log, and could make a plain HTTP request look secure to Django.
"""

import argparse
import os
from collections.abc import Iterator
from pathlib import Path

import uvicorn
from django.conf import settings
from uvicorn.supervisors.statreload import StatReload

APPLICATION = "dataplatform.asgi:application"
# What a running server would not see change: its modules, and the templates and translations Django caches
# (the cached template loader is on in DEBUG too, and only runserver's autoreloader clears it). Static files
# need no restart: in DEBUG WhiteNoise finds them anew on every request.
RELOAD_SUFFIXES = (".py", ".html", ".mo")
RELOAD_SKIP = {"node_modules", "__pycache__"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dataplatform.webserver", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--workers", type=int, default=1, help="server processes (default 1)")
    parser.add_argument("--lifespan", choices=["auto", "on", "off"], default="auto")
    parser.add_argument("--log-level", choices=["critical", "error", "warning", "info", "debug", "trace"],
                        default="info")
    parser.add_argument("--no-access-log", dest="access_log", action="store_false")
    parser.add_argument("--reload", action="store_true",
                        help="development: restart on a change of the project's code, templates or catalogs "
                             "(one process; not with --workers)")
    args = parser.parse_args(argv)
    if args.reload and args.workers != 1:
        parser.error("--reload runs one server process: leave --workers out")

    # The settings only, not django.setup(): with several workers this process only supervises them,
    # and each worker loads the apps when it imports the application.
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dataplatform.settings")
    # Before the settings load, here and in every server process spawned from this one: the web process's
    # database connections get the web's statement timeout (settings/database.py).
    os.environ["DATAPLATFORM_PROCESS"] = "web"
    trusted_proxies = settings.TRUSTED_PROXIES
    options = dict(
        host=args.host, port=args.port, workers=args.workers, lifespan=args.lifespan,
        log_level=args.log_level, access_log=args.access_log,
        # No proxy: uvicorn leaves its proxy-headers middleware out, so the client address is the
        # connection's peer and the scheme the connection's own. With proxies: their headers only.
        # Both go into the Config that every worker process is spawned with.
        proxy_headers=bool(trusted_proxies), forwarded_allow_ips=trusted_proxies,
    )
    if args.reload:
        run_reloading(**options)
    else:
        uvicorn.run(APPLICATION, **options)


def run_reloading(**options) -> None:
    """uvicorn.run(reload=True), watching the project's sources with SourceReload: uvicorn's own reloaders watch
    only `*.py` files without the watchfiles package (which the project does not install), and under the
    whole working directory, .venv and DATA_DIR included."""
    config = uvicorn.Config(APPLICATION, reload=True, reload_dirs=[str(path) for path in source_dirs()],
                            reload_delay=1.0, **options)  # a look a second, as Django's runserver
    server = uvicorn.Server(config)
    SourceReload(config, target=server.run, sockets=[config.bind_socket()]).run()


def source_dirs() -> list[Path]:
    """The project's own folders: each installed app's top-level package that lives in the repository (the
    platform, the apps, frontend/), and the project-wide catalogs."""
    base = Path(settings.BASE_DIR)
    packages = {base / name.split(".")[0] for name in settings.INSTALLED_APPS}
    return sorted({path for path in packages if path.is_dir()} | {Path(p) for p in settings.LOCALE_PATHS if Path(p).is_dir()})


class SourceReload(StatReload):
    """uvicorn's polling reloader over RELOAD_SUFFIXES rather than `*.py` alone, skipping installed packages."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reloader_name = "SourceReload"  # in uvicorn's "... detected changes in ..." lines

    def iter_py_files(self) -> Iterator[Path]:
        for directory in self.config.reload_dirs:
            for root, dirs, files in os.walk(directory):
                dirs[:] = [name for name in dirs if name not in RELOAD_SKIP and not name.startswith(".")]
                for name in files:
                    if name.endswith(RELOAD_SUFFIXES):
                        yield Path(root, name)


if __name__ == "__main__":
    main()
