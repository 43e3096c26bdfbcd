from django.contrib import admin

from dataplatform.audit.admin import AuditedDeletionsMixin

from .forms import ThrottledAdminAuthenticationForm
from .models import ApiToken, Membership, Project

# The admin's own log-in page gets the same brute-force protection as the site's.
admin.site.login_form = ThrottledAdminAuthenticationForm


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(AuditedDeletionsMixin, admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(AuditedDeletionsMixin, admin.ModelAdmin):
    list_display = ["project", "user", "role"]
    list_filter = ["role", "project"]
    search_fields = ["user__username", "project__slug"]


@admin.register(ApiToken)
class ApiTokenAdmin(AuditedDeletionsMixin, admin.ModelAdmin):
    """Tokens can be inspected and revoked here; secrets are never stored, so never shown."""

    list_display = ["name", "user", "prefix", "read_only", "created_at", "last_used_at", "expires_at", "revoked_at"]
    list_filter = ["read_only", "revoked_at"]
    search_fields = ["name", "prefix", "user__username"]
    readonly_fields = ["prefix", "digest", "created_at", "last_used_at"]
    filter_horizontal = ["projects"]

    def has_add_permission(self, request) -> bool:
        # Creating a token here could not show its secret; use `manage.py issuetoken` or the tokens page.
        return False
