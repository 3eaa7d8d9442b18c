"""Routing's hooks into chat: every finished ROUTE answer is routed; opening a session marks its
answered questions as seen (the unread badge)."""

from __future__ import annotations

import logging

from django.dispatch import receiver

from chat.signals import answer_completed, session_opened

logger = logging.getLogger(__name__)


@receiver(answer_completed, dispatch_uid="routing.route_low_confidence_answer")
def route_low_confidence_answer(sender, message, **kwargs) -> None:
    from routing.services import question_route

    question_route(message=message)


@receiver(session_opened, dispatch_uid="routing.mark_answers_seen")
def mark_answers_seen(sender, session, user, **kwargs) -> None:
    from routing.services import answers_mark_seen

    answers_mark_seen(user=user, session=session)
