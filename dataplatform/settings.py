"""Settings, all read from the environment.

Every variable has a default that gives the embedded mode: SQLite under var/,
a filesystem-broker Celery worker (no Redis), and the local CPU model.
Production sets DATABASE_URL, REDIS_URL, MODEL_BACKEND=vllm, VLLM_BASE_URL, ...
"""

import ipaddress
import os
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_ip_networks(name: str) -> list[str]:
    """A comma-separated list of IP addresses and networks. A typo stops the start: uvicorn would take it
    for a host name and quietly never match it."""
    values = env_list(name, "")
    for value in values:
        try:
            ipaddress.ip_network(value)
        except ValueError:
            raise RuntimeError(f"{name}: {value!r} is not an IP address or network.") from None
    return values


DATA_DIR = Path(os.environ.get("DATA_DIR") or BASE_DIR / "var").resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", True)
# The embedded default key is only for a local demo; production must set SECRET_KEY.
SECRET_KEY = os.environ.get("SECRET_KEY") or "embedded-mode-insecure-key-set-SECRET_KEY-in-production"
if not DEBUG and SECRET_KEY.startswith("embedded-mode-insecure"):
    raise RuntimeError("SECRET_KEY must be set when DEBUG is off.")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "dataplatform.accounts",
    "dataplatform.inference",
    "dataplatform.jobs",
    "dataplatform.system",
    "dataplatform.exports",
    "dataplatform.audit",
    "annotate",
    "labeler",
    "corpora",
    "frontend",
]

MIDDLEWARE = [
    "dataplatform.timing.server_timing_middleware",  # first: it times all the others
    "dataplatform.after_response.after_response_middleware",  # its work is not timed: the client has its answer
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "dataplatform.errors.ServiceUnavailableMiddleware",
]

ROOT_URLCONF = "dataplatform.urls"
WSGI_APPLICATION = "dataplatform.wsgi.application"
ASGI_APPLICATION = "dataplatform.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------
DATABASE_URL = os.environ.get("DATABASE_URL") or f"sqlite:///{DATA_DIR / 'db.sqlite3'}"
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # psycopg 3 with a connection pool per process. Under ASGI every request runs in a thread
    # of its own, so persistent connections (CONN_MAX_AGE) are never reused there: each request
    # paid ~4 ms to connect and left an idle connection behind. The pool hands one out in ~0.1 ms
    # and caps what a process holds. DATABASE_POOL_MAX_SIZE bounds it; 0 turns the pool off.
    # A pooled connection is checked before it is handed out, so connections that a PostgreSQL restart
    # severed are replaced instead of failing the next request (dataplatform/postgresql: a look at the
    # socket, and a round trip only when the server has closed it or sent something). A request waits up to
    # DATABASE_POOL_TIMEOUT seconds for a connection (a restart takes a few), then gets a 503.
    pool_max = int(os.environ.get("DATABASE_POOL_MAX_SIZE", "20"))
    DATABASES["default"].setdefault("OPTIONS", {})["connect_timeout"] = 5
    if pool_max:
        DATABASES["default"]["CONN_MAX_AGE"] = 0  # the pool keeps the connections instead
        DATABASES["default"]["OPTIONS"]["pool"] = {
            "min_size": 1, "max_size": pool_max, "timeout": float(os.environ.get("DATABASE_POOL_TIMEOUT", "5"))}
        DATABASES["default"]["ENGINE"] = "dataplatform.postgresql"  # Django's, with that cheaper check
else:
    # SQLite is shared by the web process and the worker: WAL lets reads run during writes,
    # IMMEDIATE transactions take the write lock up front (no upgrade deadlocks), and a
    # writer waits up to 20 s for the lock instead of failing at once.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "project-list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# The Docker image collects static files into the image (STATIC_ROOT=/app/staticfiles).
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT") or DATA_DIR / "static")
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# htmx comes from the npm registry (frontend/package.json); `npm ci` puts it here.
STATICFILES_DIRS = [("vendor/htmx", BASE_DIR / "frontend" / "node_modules" / "htmx.org" / "dist")]

# --- Storage: export shards go to the "exports" storage --------------------------
# The filesystem under DATA_DIR by default; S3 (or any S3-compatible store) through
# django-storages when EXPORTS_S3_BUCKET is set. Credentials come from the usual AWS_*
# variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) or the machine's role.
EXPORTS_S3_BUCKET = os.environ.get("EXPORTS_S3_BUCKET", "")
if EXPORTS_S3_BUCKET:
    EXPORTS_STORAGE = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": EXPORTS_S3_BUCKET,
            "location": os.environ.get("EXPORTS_S3_PREFIX", ""),
            "endpoint_url": os.environ.get("EXPORTS_S3_ENDPOINT_URL") or None,
            "region_name": os.environ.get("EXPORTS_S3_REGION") or None,
            "file_overwrite": True,
            "querystring_expire": 3600,  # shard downloads redirect to URLs signed for an hour
        },
    }
else:
    EXPORTS_STORAGE = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(DATA_DIR / "files"), "base_url": None},
    }
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage",
                "OPTIONS": {"location": str(DATA_DIR / "media")}},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "exports": EXPORTS_STORAGE,
}
EXPORT_DEFAULT_SHARD_ROWS = int(os.environ.get("EXPORT_DEFAULT_SHARD_ROWS", "100000"))
EXPORT_BATCH_ROWS = int(os.environ.get("EXPORT_BATCH_ROWS", "10000"))

# --- Imports: the largest file one upload may carry (JSONL, .panda.json, taxonomy YAML) ---
# Checked from the upload's size before a byte of it is read (dataplatform/imports.py). Lines are
# read in chunks, but an import is one transaction and holds the file's parsed records in memory
# until it writes, so a web process needs a few times this much RAM per concurrent import. 2 GiB
# is well above any single dataset file we import (a SWE-bench split is tens of MB) while bounding
# that memory, the temporary file Django spools the upload to, and how long one request can run.
# Split bigger files: each part imports on its own, and re-importing a part adds nothing.
# The proxy's body limit (client_max_body_size) should be a little above this: docs/operations.md.
IMPORT_MAX_FILE_BYTES = int(os.environ.get("IMPORT_MAX_FILE_BYTES", str(2 * 1024**3)))

# --- Security -----------------------------------------------------------------
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
# The reverse proxies in front of the web server (addresses or networks), empty when clients connect
# to it directly. Only from these does the web server (dataplatform/webserver.py) believe
# X-Forwarded-For, the client address of the brute-force limits and the audit log, and
# X-Forwarded-Proto, the scheme behind request.is_secure(). Django takes both from the server (the ASGI
# scope's client and scheme). Not SECURE_PROXY_SSL_HEADER: with it Django would believe
# X-Forwarded-Proto from any address, a client that reaches the server past the proxy included.
TRUSTED_PROXIES = env_ip_networks("TRUSTED_PROXIES")
# No inline script or style anywhere: model text can never become code.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    }
}

# --- API ----------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "dataplatform.accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["dataplatform.accounts.permissions.IsAuthenticatedWithTokenScope"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "dataplatform.pagination.CreatedCursorPagination",
    "EXCEPTION_HANDLER": "dataplatform.errors.api_exception_handler",
    "DEFAULT_PARSER_CLASSES": ["dataplatform.apiutils.JSONObjectParser", "rest_framework.parsers.FormParser",
                               "rest_framework.parsers.MultiPartParser"],
    # No `?format=`: every endpoint has one representation, and an unknown format was an undocumented 404.
    "URL_FORMAT_OVERRIDE": None,
    "PAGE_SIZE": 50,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Data platform API",
    "DESCRIPTION": "Projects, jobs, model backend and training exports for LLM post-training data.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Both work queues share one set of claim states; name it once.
    "ENUM_NAME_OVERRIDES": {"ClaimStateEnum": "dataplatform.claims.ClaimState"},
    # Every operation also documents the errors the shared machinery answers with (dataplatform/openapi.py).
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "dataplatform.openapi.add_error_responses"],
}

# --- Celery -------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
BROKER_DIR = DATA_DIR / "broker"
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_connect_timeout": 3, "socket_timeout": 10}
else:
    # Embedded mode: a real worker process, with kombu's filesystem transport as the broker.
    for sub in ("queue", "processed", "control"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://localhost//"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
# --- Cache: shared by every web process (failed log-in / token counters, token-use tallies) ---
# Redis when REDIS_URL is set; otherwise files under DATA_DIR, which every process of the embedded
# mode shares (the default in-memory cache would give each process its own counters). The key prefix
# keeps two databases (deployments, test databases) apart when they share a Redis or a DATA_DIR.
# Never call cache.clear(): on Redis it flushes the whole database, the Celery broker's queues included.
_CACHE_PREFIX = Path(str(DATABASES["default"]["NAME"])).name
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "dataplatform.cache.RedisCache", "LOCATION": REDIS_URL,
                          "KEY_PREFIX": _CACHE_PREFIX,
                          # one client and pool per process, not one connection per request (cache.py)
                          "OPTIONS": {"socket_connect_timeout": 3, "socket_timeout": 3}}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                          "LOCATION": str(DATA_DIR / "cache"), "KEY_PREFIX": _CACHE_PREFIX}}

# Brute-force protection (dataplatform/accounts/limiter.py): failures per window, counted from the
# first failure. Log-ins: per username and client IP, and per client IP over all usernames. API tokens:
# per client IP. 0 switches a limit off.
LOGIN_FAILURE_LIMIT = int(os.environ.get("LOGIN_FAILURE_LIMIT", "10"))
LOGIN_IP_FAILURE_LIMIT = int(os.environ.get("LOGIN_IP_FAILURE_LIMIT", "30"))
TOKEN_FAILURE_LIMIT = int(os.environ.get("TOKEN_FAILURE_LIMIT", "10"))
AUTH_FAILURE_WINDOW_SECONDS = int(os.environ.get("AUTH_FAILURE_WINDOW_SECONDS", "900"))

# Never run tasks inline: a missing broker must be an error, not a silent fallback.
CELERY_TASK_ALWAYS_EAGER = False
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = False
CELERY_BROKER_CONNECTION_TIMEOUT = 3
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.5}
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_QUEUE", "celery")

# Jobs: at most this many queued jobs per project (jobs/services.py enqueue_job); one more is refused
# (HTTP 429, Retry-After) until workers have started some. 0 switches the cap off.
JOB_MAX_QUEUED_PER_PROJECT = int(os.environ.get("JOB_MAX_QUEUED_PER_PROJECT", "100"))
# Jobs: retries of transient backend errors (BackendUnavailable) with backoff.
JOB_MAX_RETRIES = int(os.environ.get("JOB_MAX_RETRIES", "3"))
JOB_RETRY_BACKOFF_SECONDS = float(os.environ.get("JOB_RETRY_BACKOFF_SECONDS", "5"))
# Jobs: a worker that dies (SIGKILL, OOM, a lost machine) is noticed by its silence. A running job's
# worker writes a heartbeat this often; after JOB_STALE_AFTER_SECONDS without one the job is queued
# again (it resumes: kinds skip what is already written), and after JOB_MAX_STALE_RUNS such
# losses it fails with a message instead of crashing workers forever.
JOB_HEARTBEAT_SECONDS = float(os.environ.get("JOB_HEARTBEAT_SECONDS", "10"))
JOB_STALE_AFTER_SECONDS = float(os.environ.get("JOB_STALE_AFTER_SECONDS", "60"))
JOB_MAX_STALE_RUNS = int(os.environ.get("JOB_MAX_STALE_RUNS", "3"))
# A job still queued after this long is sent to the workers again: the broker may have lost its
# message (Redis restarted without persistence). A duplicate message finds the job taken and is dropped.
JOB_REPUBLISH_QUEUED_AFTER_SECONDS = float(os.environ.get("JOB_REPUBLISH_QUEUED_AFTER_SECONDS", "300"))
# Jobs: code that hangs (a blocking call, a loop) while its heartbeat thread still beats is stopped by
# Celery's time limits on `jobs.tasks.run_job`, per run (a retry or a rerun starts afresh). At the soft
# limit the job fails with a message (not retried; what it saved is kept, and Retry continues from
# there); a job still running JOB_HARD_TIME_LIMIT_SECONDS after it started has its pool process killed,
# and the reaper above queues it again (up to JOB_MAX_STALE_RUNS runs, then fails it). Keep the hard
# limit above the soft one: the gap is the time a stopped job has to clean up. The worker's values
# apply (jobs are sent without limits in the message). Enforced by the prefork pool only, which every
# worker here uses (Makefile, bin/run with the filesystem broker, compose, the tests); `--pool solo` or
# `threads` ignores both, and `manage.py export` runs in-process without a limit.
JOB_SOFT_TIME_LIMIT_SECONDS = float(os.environ.get("JOB_SOFT_TIME_LIMIT_SECONDS", str(6 * 3600)))
JOB_HARD_TIME_LIMIT_SECONDS = float(os.environ.get("JOB_HARD_TIME_LIMIT_SECONDS",
                                                   str(JOB_SOFT_TIME_LIMIT_SECONDS + 600)))
# Every worker runs the reaper this often (embedded `celery beat`, `-B`) and once when it starts.
JOB_REAP_INTERVAL_SECONDS = float(os.environ.get("JOB_REAP_INTERVAL_SECONDS", "30"))
CELERY_BEAT_SCHEDULE = {
    "reap-stale-jobs": {
        "task": "dataplatform.jobs.tasks.reap_jobs",
        "schedule": JOB_REAP_INTERVAL_SECONDS,
        "options": {"expires": JOB_REAP_INTERVAL_SECONDS},  # a reap that waited that long is superseded
    },
}
CELERY_BEAT_SCHEDULE_FILENAME = os.environ.get("CELERY_BEAT_SCHEDULE_FILENAME",
                                               str(DATA_DIR / "celerybeat-schedule"))

# --- Model backend ------------------------------------------------------------
MODEL_BACKEND = os.environ.get("MODEL_BACKEND", "local")  # "local" | "vllm"
MODEL_NAME = os.environ.get("MODEL_NAME", "")  # vllm: the served model; empty = first of /v1/models
VLLM_BASE_URL = os.environ.get("VLLM_BASE_URL", "http://127.0.0.1:8001")
VLLM_API_KEY = os.environ.get("VLLM_API_KEY", "")
# ATD teachers on other vLLM servers: only these base URLs may be named by a run (no open
# server-side requests to addresses a curator types), and they get their own key.
ATD_TEACHER_ENDPOINTS = env_list("ATD_TEACHER_ENDPOINTS", "")
ATD_TEACHER_API_KEY = os.environ.get("ATD_TEACHER_API_KEY", "")
# AED replays on the `webhook` runner: only these URLs may be named (dataplatform/outbound.py).
AED_REPLAY_WEBHOOKS = env_list("AED_REPLAY_WEBHOOKS", "")
VLLM_TIMEOUT_SECONDS = float(os.environ.get("VLLM_TIMEOUT_SECONDS", "60"))
# Optional local tokenizer directory for the vllm backend: exact token bytes for display.
VLLM_TOKENIZER_DIR = os.environ.get("VLLM_TOKENIZER_DIR", "")

# --- Logging: never log request headers (they carry tokens) ---------------------
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"httpx": {"level": "WARNING"}, "httpcore": {"level": "WARNING"}},
}
