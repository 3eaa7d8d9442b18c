from django.apps import AppConfig


class RoutingConfig(AppConfig):
    name = "routing"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Routed questions"

    def ready(self) -> None:
        from chat import presenters
        from documents.schedule import schedule_register
        from routing import (
            knowledge,
            receivers,  # connects the chat and document signals
            reminders,
        )
        from routing.selectors import route_statuses

        # The chat page says to whom an answer went and whether they answered.
        presenters.route_statuses_provide(route_statuses)
        # Citations of verified knowledge show its status as the database has it now.
        presenters.knowledge_states_provide(knowledge.badge_states)
        # Verified answers past their review date need review (each schedule round; idempotent).
        schedule_register("knowledge_review_due", knowledge.review_due)
        # Then the reminders and daily digests that are due (routing/reminders.py).
        schedule_register("reminders", reminders.run_due)
        # The owners' badges follow every status change of verified knowledge, and they are told
        # when an answer starts needing review.
        knowledge.status_listen(receivers.verified_status_changed)
