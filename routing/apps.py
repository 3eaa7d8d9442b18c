from django.apps import AppConfig


class RoutingConfig(AppConfig):
    name = "routing"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Routed questions"

    def ready(self) -> None:
        from chat import presenters
        from routing import receivers  # noqa: F401 (connects the chat signals)
        from routing.selectors import route_statuses

        # The chat page says to whom an answer went and whether they answered.
        presenters.route_statuses_provide(route_statuses)
