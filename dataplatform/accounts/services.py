"""Writes for projects, memberships and API tokens."""

import hashlib
import secrets
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from .models import ApiToken, Membership, Project, Role

TOKEN_PREFIX = "dp_"
# last_used_at is only a hint; writing it on every request would turn reads into writes.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def hash_token_secret(secret: str) -> str:
    # The secret has 256 bits of entropy, so a fast hash is enough (no password stretching needed).
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def create_project(*, slug: str, name: str, description: str = "", admin=None) -> Project:
    with transaction.atomic():
        project = Project.objects.create(slug=slug, name=name, description=description)
        if admin is not None:
            set_membership(project=project, user=admin, role=Role.ADMIN)
    return project


def set_membership(*, project: Project, user, role: Role | str) -> Membership:
    role = Role(role)
    membership, _ = Membership.objects.update_or_create(project=project, user=user, defaults={"role": role})
    return membership


def remove_membership(*, project: Project, user) -> None:
    Membership.objects.filter(project=project, user=user).delete()


def issue_token(*, user, name: str, read_only: bool = False, projects: list[Project] | None = None) -> tuple[ApiToken, str]:
    """Create a token. Returns the row and the secret; the secret is never stored or shown again."""
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
        )
        if projects:
            token.projects.set(projects)
    return token, secret


def revoke_token(*, token: ApiToken) -> ApiToken:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def authenticate_token(*, secret: str) -> ApiToken | None:
    """The active token with this secret, or None. Also refreshes last_used_at (coarsely)."""
    token = (
        ApiToken.objects.select_related("user")
        .filter(digest=hash_token_secret(secret), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if token is None:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token
