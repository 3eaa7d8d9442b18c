from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin

from access.admin import TenantScopedMixin
from ragchat.models import User


@admin.register(User)
class UserAdmin(TenantScopedMixin, BaseUserAdmin):
    fieldsets = BaseUserAdmin.fieldsets + (("Tenant", {"fields": ("tenant_id",)}),)
    # A new person joins the admin's own tenant (TenantScopedMixin.save_model): nothing to type.
    list_display = ("username", "first_name", "last_name", "email", "is_staff", "is_active")
