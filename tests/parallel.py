"""Keeps the test processes of one run (pytest-xdist's `-n`, which bin/test uses) out of each other's way.

Loaded with `-p tests.parallel` (bin/test), so it runs in each process before pytest-django reads
the settings. pytest-django already gives each process its own test database (`test_<name>_gw0`, ...); this
gives each its own:
- Redis database: counted down from REDIS_URL's (15 for gw0, 14 for gw1 with bin/test's default), because
  fault tests empty their database (FLUSHDB: what a Redis restart does) and the cache counts log-in failures;
- Celery queue (CELERY_QUEUE-gw0, ...), so that a live worker of one process never takes the other's job;
- DATA_DIR (a `xdist-gw0` folder inside it), so that exports numbered from 1 in each database never write to
  the same files; the converted model is shared through a link (its conversion holds a file lock).
Without xdist (PYTEST_XDIST_WORKER unset) nothing changes.
"""

import os
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
REDIS_DATABASES = 16  # Redis's default `databases`


def _redis_url_for(url: str, process: int) -> str:
    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    return parts._replace(path=f"/{(base - process) % REDIS_DATABASES}").geturl()


def _data_dir_for(name: str) -> Path:
    shared = Path(os.environ.get("DATA_DIR") or ROOT / "var").resolve()
    own = shared / f"xdist-{name}"
    (shared / "models").mkdir(parents=True, exist_ok=True)
    own.mkdir(parents=True, exist_ok=True)
    if not (own / "models").exists():
        (own / "models").symlink_to(shared / "models", target_is_directory=True)
    return own


def _isolate(name: str) -> None:
    process = int(name.removeprefix("gw"))
    if os.environ.get("REDIS_URL"):
        os.environ["REDIS_URL"] = _redis_url_for(os.environ["REDIS_URL"], process)
    os.environ["CELERY_QUEUE"] = f"{os.environ.get('CELERY_QUEUE', 'tests')}-{name}"
    os.environ["DATA_DIR"] = str(_data_dir_for(name))


if name := os.environ.get("PYTEST_XDIST_WORKER"):
    _isolate(name)
