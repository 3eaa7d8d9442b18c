"""Routing's hooks into chat: every finished ROUTE answer is routed; opening a session marks its
answered questions as seen (the unread badge). And verified knowledge whose status changes moves its
owners' inbox badges (and, when it starts needing review, tells them)."""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models.signals import post_init, post_save
from django.dispatch import receiver

from chat.signals import answer_completed, session_opened
from routing.models import VerifiedAnswer

logger = logging.getLogger(__name__)


@receiver(answer_completed, dispatch_uid="routing.route_low_confidence_answer")
def route_low_confidence_answer(sender, message, **kwargs) -> None:
    from routing.services import question_route

    question_route(message=message)


@receiver(session_opened, dispatch_uid="routing.mark_answers_seen")
def mark_answers_seen(sender, session, user, **kwargs) -> None:
    from routing.services import answers_mark_seen

    answers_mark_seen(user=user, session=session)


# Verified knowledge that needs review counts in its owner's inbox badge: whoever changes its status
# (a replaced source, the review date passing, re-verify, retire), the badges follow, live, and the
# people who answer for it are told when it starts needing review.


@receiver(post_init, sender=VerifiedAnswer, dispatch_uid="routing.verified_remember_status")
def verified_remember_status(sender, instance, **kwargs) -> None:
    instance._status_as_loaded = instance.__dict__.get("status")


@receiver(post_save, sender=VerifiedAnswer, dispatch_uid="routing.verified_status_changed")
def verified_status_changed(sender, instance, created, **kwargs) -> None:
    before, now = getattr(instance, "_status_as_loaded", None), instance.status
    instance._status_as_loaded = now
    if before == now and not (created and now == VerifiedAnswer.Status.NEEDS_REVIEW):
        return
    from routing.services import notify_needs_review, verified_badges_changed

    pk = instance.pk
    transaction.on_commit(lambda: verified_badges_changed(verified_id=pk))
    if now == VerifiedAnswer.Status.NEEDS_REVIEW:
        transaction.on_commit(lambda: notify_needs_review(verified_id=pk))
