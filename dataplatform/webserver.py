"""Start the web server: uvicorn serving dataplatform.asgi:application, believing proxy headers only
from the addresses in the TRUSTED_PROXIES setting.

    python -m dataplatform.webserver --host 0.0.0.0 --port 8000 --workers 4

Production starts the web app this way and no other (the Dockerfile, docker-compose.yml, and
bench/benchlib.py for the benchmarks and tests). Plain `uvicorn dataplatform.asgi:application` applies
X-Forwarded-For and X-Forwarded-Proto from 127.0.0.1 (or FORWARDED_ALLOW_IPS) by default, so anything
on the host could name its own client address, a new one per request to escape the brute-force limits
and put a forged address in the audit log, and could make a plain HTTP request look secure to Django.
"""

import argparse
import os

import uvicorn
from django.conf import settings

APPLICATION = "dataplatform.asgi:application"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dataplatform.webserver", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--workers", type=int, default=1, help="server processes (default 1)")
    parser.add_argument("--lifespan", choices=["auto", "on", "off"], default="auto")
    parser.add_argument("--log-level", choices=["critical", "error", "warning", "info", "debug", "trace"],
                        default="info")
    parser.add_argument("--no-access-log", dest="access_log", action="store_false")
    args = parser.parse_args(argv)

    # The settings only, not django.setup(): with several workers this process only supervises them,
    # and each worker loads the apps when it imports the application.
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dataplatform.settings")
    trusted_proxies = settings.TRUSTED_PROXIES
    uvicorn.run(
        APPLICATION, host=args.host, port=args.port, workers=args.workers, lifespan=args.lifespan,
        log_level=args.log_level, access_log=args.access_log,
        # No proxy: uvicorn leaves its proxy-headers middleware out, so the client address is the
        # connection's peer and the scheme the connection's own. With proxies: their headers only.
        # Both go into the Config that every worker process is spawned with.
        proxy_headers=bool(trusted_proxies), forwarded_allow_ips=trusted_proxies,
    )


if __name__ == "__main__":
    main()
