"""Settings, all read from the environment (`env.py` reads and checks each value), one module per topic.

Every variable has a default that gives the embedded mode: SQLite under var/,
a filesystem-broker Celery worker (no Redis), and the local CPU model.
Production sets DATABASE_URL, REDIS_URL, MODEL_BACKEND=vllm, VLLM_BASE_URL, ...

    core.py           paths (BASE_DIR, DATA_DIR), DEBUG, apps, middleware, templates, log-in, time
    database.py       DATABASE_URL: PostgreSQL with a pool, or SQLite
    storage.py        static files, export shards (filesystem or S3), the largest upload
    security.py       SECRET_KEY, hosts, cookies, trusted proxies, Content-Security-Policy
    api.py            Django REST framework, the OpenAPI document
    jobs.py           Celery and its broker (REDIS_URL or the filesystem), job retries and limits
    cache.py          the shared cache, brute-force limits
    model_backend.py  MODEL_BACKEND, vLLM, the other servers a job may call
    tools.py          MCP_SERVERS, the allow-list of tool servers (docs/tools.md), and their timeouts
    logs.py           logging

Importing the settings creates no folder. Each writer makes the one it writes to, when it writes: the
SQLite backend its file's folder (dataplatform/sqlite3), the filesystem broker its folders when a
process connects (dataplatform/broker.py), a worker its beat schedule's folder (dataplatform/celery.py),
collectstatic STATIC_ROOT, and the file cache, the storages and the model conversion theirs.
"""

# Each topic module imports what it needs from the others, so the order here does not matter.
# ruff: noqa: F403
from .api import *
from .cache import *
from .core import *
from .database import *
from .jobs import *
from .logs import *
from .model_backend import *
from .security import *
from .storage import *
from .tools import *
