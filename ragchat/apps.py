from django.apps import AppConfig


class RagchatConfig(AppConfig):
    name = "ragchat"
    verbose_name = "ragchat"
    default_auto_field = "django.db.models.BigAutoField"
