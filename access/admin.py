"""The admin site answers to the access policy: only admins (active superusers) enter it, and
every list is narrowed to their own tenant (`TenantScopedAdmin`)."""

from django import forms
from django.contrib import admin, messages

from access import group_sync, policy
from access.models import AuditEvent, GroupMapping, OIDCIdentity, SyncedMembership
from ragchat.bounds import (
    BoundedAutocompleteSelect,
    BoundedAutocompleteSelectMultiple,
    BoundedChangeList,
    BoundedModelMultipleChoiceField,
)


def _admin_site_permission(request) -> bool:
    return policy.may_use_admin_site(request.user)


admin.site.has_permission = _admin_site_permission
admin.site.site_header = "ragchat administration"
admin.site.site_title = "ragchat admin"


class TenantScopedMixin:
    """For a model admin: its rows are those of the admin's own tenant (the model's `tenant_field`);
    numbers in its list's lookups and its forms' choices stay within their columns (ragchat.bounds)."""

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

    def _autocomplete(self, db_field, request, kwargs, widget_class) -> None:
        if "widget" not in kwargs and db_field.name in self.get_autocomplete_fields(request):
            kwargs["widget"] = widget_class(db_field, self.admin_site, using=kwargs.get("using"))

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        self._autocomplete(db_field, request, kwargs, BoundedAutocompleteSelect)
        return self._own_tenant(super().formfield_for_foreignkey(db_field, request, **kwargs), request)

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        self._autocomplete(db_field, request, kwargs, BoundedAutocompleteSelectMultiple)
        kwargs.setdefault("form_class", BoundedModelMultipleChoiceField)
        return self._own_tenant(super().formfield_for_manytomany(db_field, request, **kwargs), request)

    def get_changelist(self, request, **kwargs):
        return BoundedChangeList


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


class GroupMappingForm(forms.ModelForm):
    class Meta:
        model = GroupMapping
        fields = ("group", "tag", "role")

    def clean_group(self):
        return (self.cleaned_data.get("group") or "").strip()

    def clean(self):
        data = super().clean()
        tag, group = data.get("tag"), data.get("group")
        duplicate = GroupMapping.objects.filter(tenant_id=getattr(tag, "tenant_id", None), group=group, tag=tag)
        if tag is not None and group and duplicate.exclude(pk=self.instance.pk).exists():
            raise forms.ValidationError(f"The group “{group}” is already mapped to {tag}: change that mapping instead.")
        return data


@admin.register(GroupMapping)
class GroupMappingAdmin(TenantScopedAdmin):
    """Identity-provider group → tag. A change is applied at once to everyone's last-known groups."""

    form = GroupMappingForm

    list_display = ("group", "tag", "role", "created_at")
    list_filter = ("role", ("tag", admin.RelatedOnlyFieldListFilter))
    search_fields = ("group", "tag__name", "tag__slug")
    autocomplete_fields = ("tag",)
    fields = ("group", "tag", "role", "tenant_id")
    ordering = ("group", "tag__name")

    def _reapply(self, request) -> None:
        changed = group_sync.reapply_last_known(tenant_id=request.user.tenant_id, actor=request.user, request=request)
        self.message_user(
            request, f"Applied to everyone's last-known groups: {changed} people's tags changed.", messages.INFO
        )

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        self._reapply(request)

    def delete_model(self, request, obj):
        super().delete_model(request, obj)
        self._reapply(request)

    def delete_queryset(self, request, queryset):
        super().delete_queryset(request, queryset)
        self._reapply(request)


@admin.register(SyncedMembership)
class SyncedMembershipAdmin(TenantScopedAdmin):
    """What group sync gave whom (read only: change the groups at the provider, or the mappings)."""

    tenant_field = "user__tenant_id"
    list_display = ("user", "tag", "role", "group_list", "kept_manual", "created_at")
    list_filter = ("role", ("tag", admin.RelatedOnlyFieldListFilter))
    search_fields = ("user__username", "user__email", "tag__name", "tag__slug")

    @admin.display(description="Groups")
    def group_list(self, row):
        return ", ".join(row.groups or [])

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(OIDCIdentity)
class OIDCIdentityAdmin(TenantScopedAdmin):
    """Company sign-in identities: who signed in with the provider, their last-known groups and the
    last sync's error. Deleting one unlinks the account (the next company sign-in links it again)."""

    tenant_field = "user__tenant_id"
    list_display = ("user", "subject", "group_list", "signed_in_at", "synced_at", "has_refresh_token", "sync_error")
    search_fields = ("user__username", "user__email", "subject")
    fields = ("user", "issuer", "subject", "groups", "signed_in_at", "synced_at", "sync_error")
    readonly_fields = fields

    @admin.display(description="Groups")
    def group_list(self, identity):
        return ", ".join(identity.groups or [])

    @admin.display(description="Refresh token", boolean=True)
    def has_refresh_token(self, identity):
        return bool(identity.refresh_token)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
