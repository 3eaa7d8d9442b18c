from django.apps import AppConfig


class RagchatConfig(AppConfig):
    name = "ragchat"
    verbose_name = "ragchat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.urls import register_converter

        from ragchat.bounds import IdConverter

        register_converter(IdConverter, "id")  # before any URLconf is loaded: `<id:…>` in every urls.py
        from ragchat import processes  # noqa: F401  (registers the start-up check of the process settings)
