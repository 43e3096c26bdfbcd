"""The cache shared by every web process, and the brute-force limits counted in it."""

from pathlib import Path

from .core import DATA_DIR
from .database import DATABASES
from .env import env_int
from .jobs import REDIS_URL

# Failed log-in / token counters and token-use tallies live here. Redis when REDIS_URL is set;
# otherwise files under DATA_DIR, which every process of the embedded mode shares (the default
# in-memory cache would give each process its own counters; the file cache makes its folder on the
# first write). The key prefix keeps two databases (deployments, test databases) apart when they share
# a Redis or a DATA_DIR. Never call cache.clear(): on Redis it flushes the whole database, the Celery
# broker's queues included.
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
LOGIN_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 10)
LOGIN_IP_FAILURE_LIMIT = env_int("LOGIN_IP_FAILURE_LIMIT", 30)
TOKEN_FAILURE_LIMIT = env_int("TOKEN_FAILURE_LIMIT", 10)
AUTH_FAILURE_WINDOW_SECONDS = env_int("AUTH_FAILURE_WINDOW_SECONDS", 900)
