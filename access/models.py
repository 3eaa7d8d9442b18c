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
