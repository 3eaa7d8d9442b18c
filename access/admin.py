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

    def _own_tenant(self, field, request):
        """Choices of a related field (a tag, an owner…) are the admin's tenant's only."""
        if field is not None and hasattr(field, "queryset") and hasattr(field.queryset.model, "tenant_id"):
            field.queryset = field.queryset.filter(tenant_id=request.user.tenant_id)
        return field

    def get_readonly_fields(self, request, obj=None):
        # The tenant is the admin's own, never typed: shown, set on save.
        fields = list(super().get_readonly_fields(request, obj))
        return fields if self.tenant_field != "tenant_id" or "tenant_id" in fields else [*fields, "tenant_id"]

    def save_model(self, request, obj, form, change):
        if not change and self.tenant_field == "tenant_id":
            obj.tenant_id = request.user.tenant_id
        super().save_model(request, obj, form, change)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        return self._own_tenant(super().formfield_for_foreignkey(db_field, request, **kwargs), request)

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        return self._own_tenant(super().formfield_for_manytomany(db_field, request, **kwargs), request)


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
