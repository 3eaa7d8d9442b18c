from django.contrib.auth.models import AbstractUser
from django.db import models


class User(AbstractUser):
    """An employee. Each user belongs to exactly one tenant; documents, tags and chunks carry it too."""

    tenant_id = models.CharField(max_length=64, default="default", db_index=True)

    class Meta(AbstractUser.Meta):
        swappable = "AUTH_USER_MODEL"

    def __str__(self) -> str:
        """People by name where they are picked or listed (admin choices, autocomplete)."""
        name = self.get_full_name()
        return f"{name} ({self.username})" if name else self.username
