from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    label = "api"
    verbose_name = "JSON API and access tokens"
    default_auto_field = "django.db.models.BigAutoField"
