"""Audit events: who did what, where, from which address. Rows are only ever added."""

from django.conf import settings
from django.db import models


class Action(models.TextChoices):
    PROJECT_CREATED = "project.created", "Project created"
    PROJECT_UPDATED = "project.updated", "Project details changed"
    MEMBERSHIP_SET = "membership.set", "Membership added or role changed"
    MEMBERSHIP_ADDED = "membership.added", "Member added"
    MEMBERSHIP_ROLE_CHANGED = "membership.role_changed", "Member's role changed"
    MEMBERSHIP_REMOVED = "membership.removed", "Membership removed"
    TOKEN_CREATED = "token.created", "API token created"
    TOKEN_REVOKED = "token.revoked", "API token revoked"
    TOKEN_USED = "token.used", "API token used (one row per token and hour)"
    TOKEN_EXPIRED_USED = "token.expired_used", "Expired API token refused (one row per token and hour)"
    EXPORT_CREATED = "export.created", "Export created"
    EXPORT_DOWNLOADED = "export.downloaded", "Export file downloaded"
    EXPORT_DELETED = "export.deleted", "Export deleted"
    ADMIN_ADDED = "admin.added", "Added in Django admin"
    ADMIN_CHANGED = "admin.changed", "Changed in Django admin"
    ADMIN_DELETED = "admin.deleted", "Deleted in Django admin"
    LOCKED_OUT = "auth.locked_out", "Client locked out after failed log-ins or tokens"


class AuditEvent(models.Model):
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # The actor and project may be deleted later; the event stays, with the name it had.
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    actor_name = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=32, choices=Action.choices)
    project = models.ForeignKey("accounts.Project", null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="+")
    target_type = models.CharField(max_length=64, blank=True)  # "<app_label>.<model>", e.g. "exports.export"
    target_id = models.CharField(max_length=64, blank=True)
    client_ip = models.GenericIPAddressField(null=True, blank=True)
    # Small and never secret: services.record() drops secret-looking keys and values.
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["project", "-created_at"], name="audit_project_created"),
            models.Index(fields=["action", "-created_at"], name="audit_action_created"),
            models.Index(fields=["actor", "-created_at"], name="audit_actor_created"),
        ]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor_name or 'system'} {self.action}"
