"""Audit events: who did what, where, from which address. Rows are only ever added."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class Action(models.TextChoices):
    PROJECT_CREATED = "project.created", _("Project created")
    PROJECT_UPDATED = "project.updated", _("Project details changed")
    MEMBERSHIP_SET = "membership.set", _("Membership added or role changed")
    MEMBERSHIP_ADDED = "membership.added", _("Member added")
    MEMBERSHIP_ROLE_CHANGED = "membership.role_changed", _("Member's role changed")
    MEMBERSHIP_REMOVED = "membership.removed", _("Membership removed")
    TOKEN_CREATED = "token.created", _("API token created")
    TOKEN_REVOKED = "token.revoked", _("API token revoked")
    TOKEN_USED = "token.used", _("API token used (one row per token and hour)")
    TOKEN_EXPIRED_USED = "token.expired_used", _("Expired API token refused (one row per token and hour)")
    EXPORT_CREATED = "export.created", _("Export created")
    EXPORT_DOWNLOADED = "export.downloaded", _("Export file downloaded")
    EXPORT_DELETED = "export.deleted", _("Export deleted")
    ADMIN_ADDED = "admin.added", _("Added in Django admin")
    ADMIN_CHANGED = "admin.changed", _("Changed in Django admin")
    ADMIN_DELETED = "admin.deleted", _("Deleted in Django admin")
    LOCKED_OUT = "auth.locked_out", _("Client locked out after failed log-ins or tokens")


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
