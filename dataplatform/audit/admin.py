from django.contrib import admin

from . import services
from .models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """Read-only: an audit log that admins could edit would prove nothing."""

    list_display = ["created_at", "actor_name", "action", "project", "target_type", "target_id", "client_ip"]
    list_filter = ["action", "project"]
    search_fields = ["actor_name", "target_id", "client_ip"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class AuditedDeletionsMixin:
    """For ModelAdmins: record multi-object deletions, whose LogEntries Django bulk-creates without signals."""

    def log_deletions(self, request, queryset):
        objects = list(queryset)
        entries = super().log_deletions(request, objects)
        if len(objects) > 1:  # a single entry is saved normally and mirrored by the post_save signal
            for obj in objects:
                services.record_request(request, action=services.Action.ADMIN_DELETED, target=obj,
                                        project=services.project_of_object(obj),
                                        detail={"object": str(obj), "change": "deleted with others"})
        return entries
