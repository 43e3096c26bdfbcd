"""Brute-force protection for log-ins and API tokens, counted in the shared cache.

Only failures are counted. A client that fails `limit` times within `window` seconds of its first
failure is refused until that window ends, and while it is refused its passwords and tokens are not
even checked (so a lucky guess during a lock-out teaches nothing). The keys are:

- log-in: the client IP together with the username typed, and the client IP alone (with a higher
  limit, against trying one password on many usernames). Never the username alone: that would let
  anybody lock a real user out from another address.
- API token: the client IP.

The cache is the one in settings.CACHES: Redis when REDIS_URL is set (shared by every web process),
a file cache under DATA_DIR otherwise (shared by the processes of one machine, the embedded mode).
"""

import hashlib
import logging
import math
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limit:
    scope: str
    limit: int  # failures allowed per window; 0 or less switches this limit off
    window: int  # seconds, counted from the first failure


def login_limits() -> tuple[Limit, Limit]:
    window = settings.AUTH_FAILURE_WINDOW_SECONDS
    return (Limit("login-user-ip", settings.LOGIN_FAILURE_LIMIT, window),
            Limit("login-ip", settings.LOGIN_IP_FAILURE_LIMIT, window))


def token_limit() -> Limit:
    return Limit("token-ip", settings.TOKEN_FAILURE_LIMIT, settings.AUTH_FAILURE_WINDOW_SECONDS)


def _login_subjects(ip: str, username: str) -> list[str]:
    # Usernames are compared case-insensitively here so that "Admin" and "admin" share one counter.
    return [f"{ip}|{username.strip().lower()}", ip]


def login_retry_after(*, ip: str, username: str) -> int | None:
    """Seconds until this client may try to log in as `username` again, or None if it may now."""
    waits = [retry_after(limit, subject) for limit, subject in zip(login_limits(), _login_subjects(ip, username),
                                                                    strict=True)]
    return max((wait for wait in waits if wait), default=None)


def record_login_failure(*, ip: str, username: str) -> None:
    for limit, subject in zip(login_limits(), _login_subjects(ip, username), strict=True):
        if record_failure(limit, subject) == limit.limit:
            _audit_lockout(limit, ip)


def token_retry_after(*, ip: str) -> int | None:
    return retry_after(token_limit(), ip)


def record_token_failure(*, ip: str) -> None:
    limit = token_limit()
    if record_failure(limit, ip) == limit.limit:
        _audit_lockout(limit, ip)


def retry_after(limit: Limit, subject: str) -> int | None:
    """Seconds until `subject` may try again under `limit`, or None if it is not blocked.

    If the cache cannot be reached (Redis restarting), nobody is blocked: log-ins and API calls keep
    working during the outage, without brute-force protection, rather than all failing with a 500."""
    if limit.limit <= 0:
        return None
    count_key, start_key = _keys(limit, subject)
    try:
        values = cache.get_many([count_key, start_key])
    except Exception as exc:  # the cache backend's own errors (redis.ConnectionError, OSError, ...)
        logger.warning("Brute-force limits are off: the cache is unavailable (%s: %s)", type(exc).__name__, exc)
        return None
    if values.get(count_key, 0) < limit.limit:
        return None
    now = time.time()
    return max(1, math.ceil(values.get(start_key, now) + limit.window - now))


def record_failure(limit: Limit, subject: str) -> int:
    """Count one failure of `subject`; returns the number of failures in its current window (0 when
    the cache cannot be reached: the failure is then not counted, see retry_after)."""
    if limit.limit <= 0:
        return 0
    try:
        return _count_failure(limit, subject)
    except Exception as exc:  # as in retry_after: an unreachable cache must not turn a 401 into a 500
        logger.warning("A failed attempt was not counted: the cache is unavailable (%s: %s)", type(exc).__name__, exc)
        return 0


def _count_failure(limit: Limit, subject: str) -> int:
    count_key, start_key = _keys(limit, subject)
    now = time.time()
    if cache.add(count_key, 1, timeout=limit.window):  # the first failure opens the window
        cache.set(start_key, now, timeout=limit.window)
        return 1
    try:
        count = cache.incr(count_key)
    except ValueError:  # the window closed between add() and incr(): this failure opens a new one
        cache.set(count_key, 1, timeout=limit.window)
        cache.set(start_key, now, timeout=limit.window)
        return 1
    # Redis keeps a key's expiry on INCR, but the file and database caches rewrite the key with the
    # default timeout; put the window's own end back so that the count lives exactly as long as the window.
    start = cache.get(start_key, now)
    cache.touch(count_key, max(1, math.ceil(start + limit.window - now)))
    return count


def forget(limit: Limit, subject: str) -> None:
    """Drop a subject's counter (tests, and an operator unblocking an address from a shell)."""
    cache.delete_many(list(_keys(limit, subject)))


def _keys(limit: Limit, subject: str) -> tuple[str, str]:
    # Hashed: usernames may hold any character, and cache keys should not carry what people typed.
    digest = hashlib.sha256(subject.encode("utf-8")).hexdigest()[:32]
    return f"authlimit:{limit.scope}:{digest}:count", f"authlimit:{limit.scope}:{digest}:start"


def _audit_lockout(limit: Limit, ip: str) -> None:
    # Imported here: the audit app's models depend on this app's models.
    from dataplatform.audit import services as audit

    audit.record(action=audit.Action.LOCKED_OUT, client_ip=ip,
                 detail={"scope": limit.scope, "limit": limit.limit, "window_seconds": limit.window})
