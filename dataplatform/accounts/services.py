"""Writes for projects, memberships and API tokens. Each write is also an audit event.

`actor` is the person doing it (None from a management command) and `client_ip` their address.
"""

import functools
import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, timedelta

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.utils import timezone

from dataplatform.audit import services as audit

from .models import ApiToken, Membership, Project, Role

TOKEN_PREFIX = "dp_"
# What issue_token() makes: the prefix and 32 random bytes in URL-safe base64 (43 characters).
TOKEN_SHAPE = re.compile(r"dp_[A-Za-z0-9_-]{43}")
# last_used_at is only a hint; writing it on every request would turn reads into writes.
LAST_USED_RESOLUTION = timedelta(minutes=1)
# Lifetimes a token may be given, in days (None: it never expires). Ten years is the longest, as a
# sanity bound: anything beyond that is "never" in practice and should say so.
TOKEN_MIN_LIFETIME_DAYS = 1
TOKEN_MAX_LIFETIME_DAYS = 3650


class TokenExpired(Exception):
    """The secret belongs to a token whose expiry has passed. Raised only for the right secret, so
    saying so (and when) tells nothing to someone guessing."""

    def __init__(self, token: ApiToken):
        super().__init__(f"Token expired on {token.expires_at.astimezone(UTC):%Y-%m-%d}")  # a date in UTC
        self.token = token


def hash_token_secret(secret: str) -> str:
    # The secret has 256 bits of entropy, so a fast hash is enough (no password stretching needed).
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def create_project(*, slug: str, name: str, description: str = "", admin=None, actor=None,
                   client_ip: str | None = None) -> Project:
    with transaction.atomic():
        project = Project.objects.create(slug=slug, name=name, description=description)
        audit.record(action=audit.Action.PROJECT_CREATED, actor=actor, project=project, target=project,
                     client_ip=client_ip, detail={"slug": slug, "name": name})
        if admin is not None:
            set_membership(project=project, user=admin, role=Role.ADMIN, actor=actor, client_ip=client_ip)
    return project


def set_membership(*, project: Project, user, role: Role | str, actor=None, client_ip: str | None = None) -> Membership:
    role = Role(role)
    with transaction.atomic():
        previous = Membership.objects.filter(project=project, user=user).values_list("role", flat=True).first()
        membership, _ = Membership.objects.update_or_create(project=project, user=user, defaults={"role": role})
        if previous != role:
            audit.record(action=audit.Action.MEMBERSHIP_SET, actor=actor, project=project, target=membership,
                         client_ip=client_ip,
                         detail={"user": user.get_username(), "role": role.value, "previous_role": previous})
    return membership


def remove_membership(*, project: Project, user, actor=None, client_ip: str | None = None) -> None:
    with transaction.atomic():
        deleted, _ = Membership.objects.filter(project=project, user=user).delete()
        if deleted:
            audit.record(action=audit.Action.MEMBERSHIP_REMOVED, actor=actor, project=project,
                         client_ip=client_ip, detail={"user": user.get_username()})


def token_expiry(expires_in_days: int | None, *, now=None):
    """When a token made now with this lifetime expires (None: never). Refuses lifetimes out of range."""
    if expires_in_days is None:
        return None
    if (isinstance(expires_in_days, bool) or not isinstance(expires_in_days, int)
            or not TOKEN_MIN_LIFETIME_DAYS <= expires_in_days <= TOKEN_MAX_LIFETIME_DAYS):
        raise ValueError(f"A token lifetime is {TOKEN_MIN_LIFETIME_DAYS} to {TOKEN_MAX_LIFETIME_DAYS} days, "
                         f"or none for a token that never expires; got {expires_in_days!r}.")
    return (now or timezone.now()) + timedelta(days=expires_in_days)


def issue_token(*, user, name: str, read_only: bool = False, projects: list[Project] | None = None,
                expires_in_days: int | None = None, actor=None, client_ip: str | None = None) -> tuple[ApiToken, str]:
    """Create a token. Returns the row and the secret; the secret is never stored or shown again.

    `expires_in_days` None makes a token that never expires. The actor defaults to the token's owner
    (people make their own tokens; `issuetoken` passes none).
    """
    expires_at = token_expiry(expires_in_days)
    if projects:
        member_of = {p.pk for p in projects if user.is_superuser or Membership.objects.filter(user=user, project=p).exists()}
        outside = [p.slug for p in projects if p.pk not in member_of]
        if outside:
            raise ValueError(f"{user} is not a member of: {', '.join(outside)}")
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=name,
            prefix=secret[: len(TOKEN_PREFIX) + 6],
            digest=hash_token_secret(secret),
            read_only=read_only,
            expires_at=expires_at,
        )
        if projects:
            token.projects.set(projects)
        audit.record(action=audit.Action.TOKEN_CREATED, actor=user if actor is None else actor, target=token,
                     client_ip=client_ip, detail={"owner": user.get_username(), "name": name, "read_only": read_only,
                                                  "projects": sorted(p.slug for p in projects or []),
                                                  "expires_at": expires_at.isoformat() if expires_at else None})
    return token, secret


def revoke_token(*, token: ApiToken, actor=None, client_ip: str | None = None) -> ApiToken:
    if token.revoked_at is None:
        with transaction.atomic():
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
            audit.record(action=audit.Action.TOKEN_REVOKED, actor=actor, target=token, client_ip=client_ip,
                         detail={"owner": token.user.get_username(), "name": token.name})
    return token


def _active_token(digest: str) -> ApiToken | None:
    """The unrevoked token of an active user with this digest, with its user, and with `is_scoped`:
    whether it is limited to some projects (nearly every request checks the scope, in
    permissions.visible_projects, and most tokens are not limited, so that then costs no query).

    Every API request runs this, so it is one SQL statement written once per process. The same query
    through the ORM (select_related, annotate(Exists)) took 2.4 ms here, nearly all of it compiling
    the query again on every request; this takes 0.6 ms."""
    query = _active_token_query()
    with connection.cursor() as cursor:
        cursor.execute(query.sql, [digest, True])
        row = cursor.fetchone()
    if row is None:
        return None
    if query.converters:  # the backend's conversions of raw values, as the ORM applies them (SQLite's datetimes)
        row = next(query.compiler.apply_converters([row], query.converters))
    split = len(query.token_fields)
    token = ApiToken.from_db(connection.alias, query.token_fields, row[:split])
    token.user = get_user_model().from_db(connection.alias, query.user_fields, row[split:-1])
    token.is_scoped = bool(row[-1])
    return token


@dataclass(frozen=True)
class _TokenQuery:
    sql: str
    token_fields: list[str]
    user_fields: list[str]
    compiler: object
    converters: dict


@functools.cache
def _active_token_query() -> _TokenQuery:
    quote = connection.ops.quote_name
    user_model = get_user_model()
    token_table, user_table = ApiToken._meta.db_table, user_model._meta.db_table
    token_fields, user_fields = ApiToken._meta.concrete_fields, user_model._meta.concrete_fields
    scope = ApiToken.projects
    sql = (f"SELECT {', '.join(f't.{quote(field.column)}' for field in token_fields)}, "
           f"{', '.join(f'u.{quote(field.column)}' for field in user_fields)}, "
           f"EXISTS (SELECT 1 FROM {quote(scope.through._meta.db_table)} s "
           f"WHERE s.{quote(scope.field.m2m_column_name())} = t.id) "
           f"FROM {quote(token_table)} t JOIN {quote(user_table)} u ON u.id = t.user_id "
           "WHERE t.digest = %s AND t.revoked_at IS NULL AND u.is_active = %s")
    compiler = ApiToken.objects.none().query.get_compiler(connection=connection)
    columns = [field.get_col(token_table) for field in token_fields] + [field.get_col(user_table) for field in user_fields]
    return _TokenQuery(sql=sql, token_fields=[field.attname for field in token_fields],
                       user_fields=[field.attname for field in user_fields], compiler=compiler,
                       converters=compiler.get_converters(columns))


def warm_up() -> None:
    """Build the per-process query now (the web server's start calls it), not in some user's request."""
    _active_token_query()


def looks_like_token(secret: str) -> bool:
    """Whether `secret` has the shape of a token this platform issues (checked before any database query)."""
    return TOKEN_SHAPE.fullmatch(secret) is not None


def authenticate_token(*, secret: str) -> ApiToken | None:
    """The active token with this secret, or None. `note_token_use` then records the use.

    Raises TokenExpired for the secret of an expired token (not revoked, of an active user), so that
    its holder can be told to make a new one; unknown, revoked and expired-and-revoked secrets are
    all just None.
    """
    if not looks_like_token(secret):
        return None
    token = _active_token(hash_token_secret(secret))
    if token is None:
        return None
    if token.is_expired:
        raise TokenExpired(token)
    return token


def note_token_use(*, token: ApiToken, client_ip: str | None) -> None:
    """Record one request made with `token`: its last_used_at (coarsely) and the audit log's hourly tally.

    API authentication runs this after the response has gone out (dataplatform/after_response.py)."""
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    audit.record_token_use(token=token, client_ip=client_ip)
