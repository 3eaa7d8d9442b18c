"""The admin site answers to the access policy: only admins (active superusers) enter it, and
every list is narrowed to their own tenant (`TenantScopedAdmin`)."""
from django.contrib import admin

from access import policy
from access.models import AuditEvent


def _admin_site_permission(request) -> bool:
    return policy.may_use_admin_site(request.user)


admin.site.has_permission = _admin_site_permission
admin.site.site_header = "ragchat administration"
admin.site.site_title = "ragchat admin"


class TenantScopedMixin:
    """For a model admin: its rows are those of the admin's own tenant (the model's `tenant_field`)."""

    tenant_field = "tenant_id"

    def get_queryset(self, request):
        return super().get_queryset(request).filter(**{self.tenant_field: request.user.tenant_id})


class TenantScopedAdmin(TenantScopedMixin, admin.ModelAdmin):
    pass


@admin.register(AuditEvent)
class AuditEventAdmin(TenantScopedAdmin):
    list_display = ("created_at", "action", "actor_name", "subject_name", "summary", "ip_address")
    list_filter = ("action",)
    search_fields = ("summary", "actor_name", "subject_name")
    date_hierarchy = "created_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
