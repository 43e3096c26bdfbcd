"""Reads of the audit log, scoped to the user: superusers see everything, project admins their projects."""

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.utils.translation import gettext

from dataplatform.accounts.models import ApiToken, Role
from dataplatform.accounts.permissions import CAN_MANAGE_PROJECT, project_for, visible_projects

from .models import AuditEvent


def can_read_audit(user, *, token: ApiToken | None = None) -> bool:
    return user.is_authenticated and user.is_active and (
        user.is_superuser or visible_projects(user, roles=CAN_MANAGE_PROJECT, token=token).exists())


def events_for_user(user, *, token: ApiToken | None = None) -> QuerySet[AuditEvent]:
    """Events the user may read. Raises PermissionDenied for someone who administers nothing."""
    if not can_read_audit(user, token=token):
        raise PermissionDenied(gettext("Only superusers and project admins can read the audit log."))
    events = AuditEvent.objects.select_related("project")
    # A superuser with a token scoped to projects sees those projects only, like everywhere else.
    if not (user.is_superuser and not (isinstance(token, ApiToken) and token.projects.exists())):
        events = events.filter(project__in=visible_projects(user, roles=[Role.ADMIN], token=token))
    return events


def filter_events(events: QuerySet[AuditEvent], user, *, token: ApiToken | None = None, action: str = "",
                  actor: str = "", project: str = "", since=None, before_id: int | None = None) -> QuerySet:
    """Narrow `events`. A project the user does not administer is a 404 (or 403 for a non-admin member)."""
    if action:
        events = events.filter(action=action)
    if actor:
        events = events.filter(actor_name=actor)
    if project:
        found, _ = project_for(user, project, CAN_MANAGE_PROJECT, token=token)
        events = events.filter(project=found)
    if since is not None:
        events = events.filter(created_at__gte=since)
    if before_id is not None:
        events = events.filter(pk__lt=before_id)
    return events
