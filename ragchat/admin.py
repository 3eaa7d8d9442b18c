from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin

from access.admin import TenantScopedMixin
from ragchat.models import User


@admin.register(User)
class UserAdmin(TenantScopedMixin, BaseUserAdmin):
    fieldsets = BaseUserAdmin.fieldsets + (("Tenant", {"fields": ("tenant_id",)}),)
    add_fieldsets = BaseUserAdmin.add_fieldsets + (("Tenant", {"fields": ("tenant_id",)}),)
    list_display = ("username", "email", "tenant_id", "is_staff", "is_active")
