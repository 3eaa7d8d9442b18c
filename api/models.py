"""Personal access tokens for the JSON API (/api/v1/).

A token acts as its person and never more: every endpoint asks `access.policy` with the token's
user, and a token's scopes only narrow what that person may do. The secret is shown once, when the
token is made; only its SHA-256 is stored (the secret is 256 random bits, so a slow salted hash
would add nothing but latency to every call).
"""

from django.conf import settings
from django.db import models


class AccessToken(models.Model):
    class Scope(models.TextChoices):
        READ = "read", "Read: search, documents, own chats"
        CHAT = "chat", "Chat: ask questions"
        UPLOAD = "upload", "Upload: add and delete documents"
        ANSWER = "answer", "Answer: routed questions sent to you"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="access_tokens")
    name = models.CharField(max_length=100)
    # The public part of the token ("rct_<key_id>_<secret>"): finds the row; shown in lists.
    key_id = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64, help_text="SHA-256 of the whole token, hex.")
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Empty: never expires.")
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} (rct_{self.key_id}_…)"

    @property
    def prefix(self) -> str:
        return f"rct_{self.key_id}_"
