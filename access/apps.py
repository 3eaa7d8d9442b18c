from django.apps import AppConfig


class AccessConfig(AppConfig):
    """The access policy (`access.policy`), the audit log, and the admins' "view as" page."""

    name = "access"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from access import receivers  # noqa: F401  (sign-in events to the audit log)
