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
from django.utils.translation import gettext, gettext_lazy

from dataplatform.audit import services as audit
from dataplatform.errors import Conflict, Missing, Refused
from dataplatform.imports.parsers import UNSTORABLE

from . import signals
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
# A license id as the Hugging Face Hub and SPDX write them ("cc-by-4.0", "apache-2.0", "other"), stored lowercase
# (SPDX ids are case-insensitive; the Hub's are lowercase).
LICENSE_SHAPE = re.compile(r"[a-z0-9][a-z0-9.+-]{0,63}")
# Django's slug (the URLs' <slug:...>), at most Project.slug's 64 characters.
PROJECT_SLUG = re.compile(r"[-a-zA-Z0-9_]{1,64}")


class MembershipRefused(Refused):
    """An invalid role, an unknown user, or a change that would leave the project without an admin."""


class AlreadyMember(Conflict):
    pass


class NotAMember(Missing):
    pass


class TokenExpired(Exception):
    """The secret belongs to a token whose expiry has passed. Raised only for the right secret, so
    saying so (and when) tells nothing to someone guessing."""

    def __init__(self, token: ApiToken):
        self.date = f"{token.expires_at.astimezone(UTC):%Y-%m-%d}"  # a date in UTC
        super().__init__(f"Token expired on {self.date}")
        self.token = token


def hash_token_secret(secret: str) -> str:
    # The secret has 256 bits of entropy, so a fast hash is enough (no password stretching needed).
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class ProjectRefused(Refused):
    """A project that cannot be made: a slug taken or not a slug, no name."""


def create_project(*, slug: str, name: str, description: str = "", license: str = "", admin=None, actor=None,
                   client_ip: str | None = None) -> Project:
    """A new project, with its audit row; `admin` (e.g. who made it) becomes its first admin."""
    slug, name, license = clean_project_slug(slug), clean_project_name(name), clean_license(license)
    with transaction.atomic():
        if Project.objects.filter(slug=slug).exists():
            raise ProjectRefused(gettext("A project with the slug '%(slug)s' exists already.") % {"slug": slug},
                                 field="slug")
        project = Project.objects.create(slug=slug, name=name, description=description, license=license)
        signals.project_created.send(sender=Project, project=project)
        audit.record(action=audit.Action.PROJECT_CREATED, actor=actor, project=project, target=project,
                     client_ip=client_ip, detail={"slug": slug, "name": name, "license": license})
        if admin is not None:
            set_membership(project=project, user=admin, role=Role.ADMIN, actor=actor, client_ip=client_ip)
    return project


def clean_project_slug(value: str) -> str:
    """`value` trimmed, if it is a project slug (the page's form checks it too: accounts/inputs.py)."""
    slug = value.strip()
    if not PROJECT_SLUG.fullmatch(slug):
        raise ProjectRefused(gettext("'%(slug)s' is not a slug: 1 to 64 letters, digits, '-' or '_'.")
                             % {"slug": slug[:80]}, field="slug")
    return slug


PROJECT_NAME_LENGTH = Project._meta.get_field("name").max_length
NO_PROJECT_NAME = gettext_lazy("A project needs a name (at most %(count)d characters).")


def clean_project_name(value: str) -> str:
    name = value.strip()
    if not name or len(name) > PROJECT_NAME_LENGTH:
        raise ProjectRefused(NO_PROJECT_NAME % {"count": PROJECT_NAME_LENGTH}, field="name")
    return name


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


def clean_license(value: str) -> str:
    """`value` as stored: trimmed and lowercase; empty means not stated. Refuses what is not a license id."""
    license = (value or "").strip().lower()
    if license and not LICENSE_SHAPE.fullmatch(license):
        raise Refused(gettext("'%(value)s' is not a license id: use a Hugging Face Hub or SPDX id such as "
                              "cc-by-4.0, apache-2.0 or mit (letters, digits, '.', '+' and '-', at most 64), 'other', "
                              "or nothing.") % {"value": value[:80]}, field="license")
    return license


def set_project_license(*, project: Project, license: str, actor=None, client_ip: str | None = None) -> Project:
    license = clean_license(license)
    if license != project.license:
        with transaction.atomic():
            previous, project.license = project.license, license
            project.save(update_fields=["license"])
            audit.record(action=audit.Action.PROJECT_UPDATED, actor=actor, project=project, target=project,
                         client_ip=client_ip, detail={"license": license, "previous_license": previous})
    return project


def update_project_settings(*, project: Project, changes: dict, actor=None, client_ip: str | None = None) -> Project:
    """Set the settings in `changes` (inputs.ProjectSettingsSerializer's), with an audit row naming each change."""
    diff = {name: [getattr(project, name), value] for name, value in changes.items() if getattr(project, name) != value}
    if diff:
        with transaction.atomic():
            for name, (_, value) in diff.items():
                setattr(project, name, value)
            project.save(update_fields=list(diff))
            audit.record(action=audit.Action.PROJECT_UPDATED, actor=actor, project=project, target=project,
                         client_ip=client_ip, detail={"settings": diff})
    return project


# --- members: add, change the role of, remove. The project keeps at least one admin. --------------------------

def _valid_role(role) -> Role:
    try:
        return Role(role)
    except ValueError:
        raise MembershipRefused(gettext("'%(role)s' is not a role; the roles are %(roles)s.")
                                % {"role": str(role)[:40], "roles": ", ".join(Role.values)}, field="role") from None


def _the_user(user, username: str | None):
    if user is not None:
        return user
    # A NUL (which PostgreSQL refuses in a query) is in no username: a form body can carry one.
    found = get_user_model().objects.filter(username=username).first() if (
        username and not UNSTORABLE.search(username)) else None
    if found is None:
        raise MembershipRefused(gettext("No user named '%(username)s'.") % {"username": str(username or "")[:150]},
                                field="username")
    return found


def _lock_members_of(project: Project) -> None:
    """Lock the project's row until the transaction ends: membership changes of one project happen one at a
    time, so two admins demoting each other cannot both pass the last-admin check. FOR NO KEY UPDATE, so rows
    that only point at the project (jobs, audit events) can still be written meanwhile."""
    Project.objects.select_for_update(no_key=True).only("pk").get(pk=project.pk)


def _locked_membership(project: Project, user) -> Membership:
    """The user's membership, read under _lock_members_of."""
    _lock_members_of(project)
    membership = Membership.objects.filter(project=project, user=user).first()
    if membership is None:
        raise NotAMember(gettext("%(username)s is not a member of %(project)s.")
                         % {"username": user.get_username(), "project": project.slug})
    return membership


def _keep_an_admin(project: Project, membership: Membership, doing: str) -> None:
    if (membership.role == Role.ADMIN
            and not Membership.objects.filter(project=project, role=Role.ADMIN).exclude(pk=membership.pk).exists()):
        message = (gettext("%(username)s is the last admin of %(project)s; make another member admin before "
                           "demoting them.") if doing == "demoting" else
                   gettext("%(username)s is the last admin of %(project)s; make another member admin before "
                           "removing them."))
        raise MembershipRefused(message % {"username": membership.user.get_username(), "project": project.slug})


def add_member(*, project: Project, user=None, username: str | None = None, role: Role | str, actor=None,
               client_ip: str | None = None) -> Membership:
    """Make `user` (or the user named `username`) a member with `role`. Refuses an invalid role, an unknown
    user, and someone who is a member already (their role is changed with change_member_role)."""
    role = _valid_role(role)
    user = _the_user(user, username)
    with transaction.atomic():
        _lock_members_of(project)
        existing = Membership.objects.filter(project=project, user=user).values_list("role", flat=True).first()
        if existing is not None:
            raise AlreadyMember(gettext("%(username)s is already a member of %(project)s (as %(role)s); change their "
                                        "role instead.") % {"username": user.get_username(), "project": project.slug,
                                                            "role": existing})
        membership = Membership.objects.create(project=project, user=user, role=role)
        audit.record(action=audit.Action.MEMBERSHIP_ADDED, actor=actor, project=project, target=membership,
                     client_ip=client_ip, detail={"user": user.get_username(), "role": role.value})
    return membership


def change_member_role(*, project: Project, user=None, username: str | None = None, role: Role | str, actor=None,
                       client_ip: str | None = None) -> Membership:
    """Give a member another role (the same role again changes nothing). The last admin stays an admin."""
    role = _valid_role(role)
    user = _the_user(user, username)
    with transaction.atomic():
        membership = _locked_membership(project, user)
        if membership.role == role:
            return membership
        if role != Role.ADMIN:
            _keep_an_admin(project, membership, "demoting")
        previous, membership.role = membership.role, role
        membership.save(update_fields=["role"])
        audit.record(action=audit.Action.MEMBERSHIP_ROLE_CHANGED, actor=actor, project=project, target=membership,
                     client_ip=client_ip,
                     detail={"user": user.get_username(), "role": role.value, "previous_role": previous})
    return membership


def remove_member(*, project: Project, user=None, username: str | None = None, actor=None,
                  client_ip: str | None = None) -> None:
    """Take a member out of the project. The last admin cannot be removed."""
    user = _the_user(user, username)
    with transaction.atomic():
        membership = _locked_membership(project, user)
        _keep_an_admin(project, membership, "removing")
        membership_id, role = membership.pk, membership.role
        membership.delete()
        audit.record(action=audit.Action.MEMBERSHIP_REMOVED, actor=actor, project=project,
                     target_type=Membership._meta.label_lower, target_id=membership_id, client_ip=client_ip,
                     detail={"user": user.get_username(), "role": role})


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
