"""Writes of audit events. Every other app records through these functions."""

import ipaddress
import logging
import re
import time
from datetime import UTC, datetime

from django.core.cache import cache
from django.db.models import Model

from dataplatform.client_address import client_ip

from .models import Action, AuditEvent

logger = logging.getLogger(__name__)

__all__ = ["Action", "project_of_object", "record", "record_admin_log_entry", "record_expired_token_use",
           "record_request", "record_token_use"]

# Belt and braces: callers never pass secrets, and if one ever does, the row still does not keep it.
SECRET_KEY_NAMES = re.compile(r"secret|password|passwd|digest|authorization|api_?key|cookie|session", re.IGNORECASE)
TOKEN_SHAPED = re.compile(r"dp_[A-Za-z0-9_-]{16,}")
REDACTED = "[redacted]"
MAX_TEXT = 500

# Token use is coarse: one row per token per clock hour, whose request count is brought up to date at
# most once a minute. A busy trainer makes 24 rows a day and at most one UPDATE a minute, however many
# requests it sends, so token use cannot flood the table (or turn every read into a write).
TOKEN_USE_FLUSH_SECONDS = 60
TOKEN_USE_KEY_TTL = 2 * 3600


def record(*, action: Action | str, actor=None, project=None, target: Model | None = None, target_type: str = "",
           target_id: str | int = "", client_ip: str | None = None, detail: dict | None = None) -> AuditEvent:
    if target is not None:
        target_type, target_id = target._meta.label_lower, target.pk
    actor = actor if actor is not None and getattr(actor, "is_authenticated", False) else None
    return AuditEvent.objects.create(
        action=Action(action),
        actor=actor,
        actor_name=actor.get_username() if actor else "",
        project=project,
        target_type=target_type,
        target_id=str(target_id) if target_id is not None else "",
        client_ip=_valid_ip(client_ip),
        detail=_scrub(detail or {}),
    )


def record_request(request, *, action: Action | str, project=None, target: Model | None = None,
                   target_type: str = "", target_id: str | int = "", detail: dict | None = None) -> AuditEvent:
    """Record an action a view or API view performed for the request's user."""
    return record(action=action, actor=request.user, project=project, target=target, target_type=target_type,
                  target_id=target_id, client_ip=client_ip(request), detail=detail)


def record_token_use(*, token, client_ip: str | None) -> None:
    """Count one request made with `token`; the first of each hour makes the hour's row.

    The tally lives in the cache: if the cache cannot be reached (Redis restarting) the request is
    served anyway and goes uncounted, rather than failing with a 500."""
    try:
        _count_token_use(token, client_ip)
    except Exception as exc:  # the cache backend's own errors (redis.ConnectionError, OSError, ...)
        logger.warning("Token use not counted: the cache is unavailable (%s: %s)", type(exc).__name__, exc)


def _this_hour(kind: str, token) -> tuple[str, datetime]:
    """The cache key of `token`'s `kind` tally for the current hour, and when the hour started. The
    digest's start makes the key unique across databases that reuse primary keys (test runs)."""
    hour = int(time.time() // 3600)
    return f"audit:{kind}:{token.pk}-{token.digest[:12]}:{hour}", datetime.fromtimestamp(hour * 3600, tz=UTC)


def _token_rows_since(action: Action, token, hour_start: datetime):
    return AuditEvent.objects.filter(action=action, target_type=token._meta.label_lower, target_id=str(token.pk),
                                     created_at__gte=hour_start)


def _count_token_use(token, client_ip: str | None) -> None:
    count_key, hour_start = _this_hour("token-use", token)
    # Count first: every request of the hour but the first finds the key (one round trip fewer on
    # every API call than trying to add it first).
    try:
        count = cache.incr(count_key)
    except ValueError:  # the hour's first request, or a cache that lost the key
        if cache.add(count_key, 1, timeout=TOKEN_USE_KEY_TTL):
            count = 1
        else:  # another request of the same token made it just now
            count = cache.incr(count_key)
    event_key = f"{count_key}:event"
    if count == 1:
        # A cache that lost its keys (a restarted Redis, an evicted file) must not make a second row
        # for the same hour: continue the row that exists, adding to its count.
        event = _token_rows_since(Action.TOKEN_USED, token, hour_start).order_by("created_at").first()
        base = 0
        if event is None:
            event = record(action=Action.TOKEN_USED, actor=token.user, target=token, client_ip=client_ip,
                           detail=_token_use_detail(token, hour_start, 1))
        else:
            base = int(event.detail.get("requests", 0))
            _flush_token_use(event.pk, token, hour_start, base + 1)
        cache.set(event_key, (event.pk, base), timeout=TOKEN_USE_KEY_TTL)
        cache.set(f"{count_key}:flushed", 1, timeout=TOKEN_USE_FLUSH_SECONDS)
        return
    if cache.add(f"{count_key}:flushed", 1, timeout=TOKEN_USE_FLUSH_SECONDS):
        known = cache.get(event_key)
        if known:
            event_id, base = known
            _flush_token_use(event_id, token, hour_start, base + count)


def record_expired_token_use(*, token, client_ip: str | None) -> None:
    """Record that an expired token was presented: the first refusal of each hour makes one row.

    Rows are not counted further: the row is there so that an admin can find the machine still
    holding the old token (the address) and whose it is, not to measure how often it retries."""
    key, hour_start = _this_hour("token-expired", token)
    try:
        first_this_hour = cache.add(key, 1, timeout=TOKEN_USE_KEY_TTL)
    except Exception as exc:  # as in record_token_use: the 401 is answered anyway
        logger.warning("Expired token use not recorded: the cache is unavailable (%s: %s)", type(exc).__name__, exc)
        return
    if not first_this_hour:
        return
    # A cache that lost its keys must not make a second row for the same hour.
    if _token_rows_since(Action.TOKEN_EXPIRED_USED, token, hour_start).exists():
        return
    record(action=Action.TOKEN_EXPIRED_USED, actor=token.user, target=token, client_ip=client_ip,
           detail={"token_name": token.name, "hour": hour_start.isoformat(),
                   "expired_at": token.expires_at.isoformat()})


def _token_use_detail(token, hour_start: datetime, requests: int) -> dict:
    return {"token_name": token.name, "hour": hour_start.isoformat(), "requests": requests,
            "read_only": token.read_only}


def _flush_token_use(event_id: int, token, hour_start: datetime, requests: int) -> None:
    AuditEvent.objects.filter(pk=event_id).update(detail=_scrub(_token_use_detail(token, hour_start, requests)))


def record_admin_log_entry(entry) -> AuditEvent | None:
    """Mirror one Django admin LogEntry (addition, change or deletion of any model)."""
    from django.contrib.admin.models import ADDITION, CHANGE, DELETION

    action = {ADDITION: Action.ADMIN_ADDED, CHANGE: Action.ADMIN_CHANGED, DELETION: Action.ADMIN_DELETED}.get(
        entry.action_flag)
    if action is None:
        return None
    content_type = entry.content_type
    target_type = f"{content_type.app_label}.{content_type.model}" if content_type else ""
    return record(
        action=action, actor=entry.user, project=_project_of(target_type, entry.object_id),
        target_type=target_type, target_id=entry.object_id or "",
        detail={"object": entry.object_repr, "change": entry.get_change_message()},
    )


def _project_of(target_type: str, object_id: str | None):
    """The project an admin change belongs to, so that its admins see it too."""
    from dataplatform.accounts.models import Membership, Project

    if not object_id or not str(object_id).isdigit():
        return None
    if target_type == "accounts.project":
        return Project.objects.filter(pk=object_id).first()
    if target_type == "accounts.membership":
        membership = Membership.objects.select_related("project").filter(pk=object_id).first()
        return membership.project if membership else None
    return None


def project_of_object(obj):
    """The project a model instance belongs to (itself for a project), or None."""
    from dataplatform.accounts.models import Project

    if isinstance(obj, Project):
        return obj
    project = getattr(obj, "project", None)
    return project if isinstance(project, Project) else None


def _valid_ip(value: str | None) -> str | None:
    try:
        return str(ipaddress.ip_address(value)) if value else None
    except ValueError:
        return None


def _scrub(value, depth: int = 0):
    if depth > 4:
        return REDACTED
    if isinstance(value, dict):
        return {str(key): REDACTED if SECRET_KEY_NAMES.search(str(key)) else _scrub(item, depth + 1)
                for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(item, depth + 1) for item in value[:50]]
    if isinstance(value, str):
        return TOKEN_SHAPED.sub("dp_" + REDACTED, value)[:MAX_TEXT]
    if value is None or isinstance(value, bool | int | float):
        return value
    return _scrub(str(value), depth + 1)
