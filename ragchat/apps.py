from django.apps import AppConfig


class RagchatConfig(AppConfig):
    name = "ragchat"
    verbose_name = "ragchat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from ragchat import processes  # noqa: F401  (registers the start-up check of the process settings)
