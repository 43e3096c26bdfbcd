from django.contrib import admin

from .models import Job


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "kind", "state", "progress_done", "progress_total", "attempts", "created_at"]
    list_filter = ["state", "kind", "project"]
    readonly_fields = [f.name for f in Job._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False  # jobs are created through services.enqueue_job only
