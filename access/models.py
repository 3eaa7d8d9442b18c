"""The audit log: who did what that bears on access, for admins to read."""

from django.conf import settings
from django.db import models


class AuditEvent(models.Model):
    class Action(models.TextChoices):
        VIEW_AS = "view_as", "View as"
        SIGN_IN = "sign_in", "Signed in"
        SIGN_IN_FAILED = "sign_in_failed", "Sign-in failed"
        LOCKED_OUT = "locked_out", "Locked out"
        TOKEN_CREATED = "token_created", "Access token created"
        TOKEN_REVOKED = "token_revoked", "Access token revoked"
        MEMBERSHIP_ADDED = "membership_added", "Tag membership added"
        MEMBERSHIP_REMOVED = "membership_removed", "Tag membership removed"
        TAG_OWNER_CHANGED = "tag_owner_changed", "Tag owner changed"
        DOCUMENT_DELETED = "document_deleted", "Document deleted"
        GROUPS_SYNCED = "groups_synced", "Groups synced"

    tenant_id = models.CharField(max_length=64, db_index=True)
    action = models.CharField(max_length=32, choices=Action.choices, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True, default="")  # kept when the account goes
    subject = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The person the action was about (e.g. whose view an admin previewed).",
    )
    subject_name = models.CharField(max_length=150, blank=True, default="")
    summary = models.CharField(max_length=500, blank=True, default="")
    data = models.JSONField(default=dict, blank=True)
    ip_address = models.GenericIPAddressField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["tenant_id", "action", "created_at"])]

    def __str__(self) -> str:
        return f"{self.get_action_display()}: {self.summary[:60]}"


class GroupMapping(models.Model):
    """An identity-provider group that grants a tag: its members become the tag's members, or (role
    owner) its owner when the tag has none. Applied at every company sign-in and by `sync_groups`."""

    class Role(models.TextChoices):
        MEMBER = "member", "Member (reads the tag)"
        OWNER = "owner", "Owner (answers and uploads; member if the tag has another owner)"

    tenant_id = models.CharField(max_length=64, default="default", db_index=True)
    group = models.CharField(
        max_length=255,
        help_text="The group exactly as the identity provider sends it in the groups claim (a name, a path "
        "such as /staff/finance, or an id such as Entra's object ids).",
    )
    tag = models.ForeignKey("documents.Tag", on_delete=models.CASCADE, related_name="group_mappings")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["group", "tag__name"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant_id", "group", "tag"],
                name="groupmapping_unique_per_tag",
                violation_error_message="This group is already mapped to this tag.",
            )
        ]

    def __str__(self) -> str:
        return f"{self.group} → {self.tag} ({self.role})"

    def save(self, *args, **kwargs):
        if self.tag_id is not None:  # a mapping belongs to its tag's tenant, whoever saves it
            self.tenant_id = self.tag.tenant_id
        super().save(*args, **kwargs)


class SyncedMembership(models.Model):
    """A tag membership (or ownership) that group sync gave a person: the rows of `Tag.members` and
    `Tag.owner` with one of these are synced, the others manual. `kept_manual`: the person already
    held that role by hand when sync added it, so losing the group leaves it in place."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="synced_memberships")
    tag = models.ForeignKey("documents.Tag", on_delete=models.CASCADE, related_name="synced_memberships")
    role = models.CharField(max_length=16, choices=GroupMapping.Role.choices)
    groups = models.JSONField(default=list, blank=True, help_text="The groups that grant it.")
    kept_manual = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tag__name", "user__username"]
        constraints = [models.UniqueConstraint(fields=["user", "tag", "role"], name="syncedmembership_unique")]

    def __str__(self) -> str:
        return f"{self.user} {self.role} of {self.tag} (synced)"


class OIDCIdentity(models.Model):
    """The company account a person signs in with: the provider's subject, the groups it sent last,
    and (when the provider gives one) a refresh token, encrypted, that lets `sync_groups` ask the
    provider for the current groups without the person."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identity")
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    groups = models.JSONField(default=list, blank=True, help_text="The groups the provider sent last.")
    refresh_token = models.TextField(blank=True, default="", help_text="Encrypted with a key derived from SECRET_KEY.")
    signed_in_at = models.DateTimeField(null=True, blank=True)
    synced_at = models.DateTimeField(null=True, blank=True)
    sync_error = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        verbose_name = "company sign-in identity"
        verbose_name_plural = "company sign-in identities"
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="oidcidentity_unique_subject")]

    def __str__(self) -> str:
        return f"{self.user} ({self.subject})"
