from django.apps import AppConfig


class RoutingConfig(AppConfig):
    name = "routing"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Routed questions"

    def ready(self) -> None:
        from routing import receivers  # noqa: F401 (connects the chat signals)
