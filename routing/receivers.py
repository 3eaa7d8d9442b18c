"""Routing's hooks into chat: every finished ROUTE answer is routed; opening a session marks its
answered questions as seen (the unread badge). And verified knowledge whose status changes moves its
owners' inbox badges (and, when it starts needing review, tells them)."""

from __future__ import annotations

import logging

from django.db.models.signals import post_save, pre_delete
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
# (a replaced source, the review date passing, re-verify, edit, retire), the badges follow, live,
# and the people who answer for it are told when it starts needing review. Registered with
# routing.knowledge.status_listen (routing/apps.py), which calls it after the change commits.


def verified_status_changed(verified: VerifiedAnswer) -> None:
    from routing.services import notify_needs_review, verified_badges_changed

    verified_badges_changed(verified_id=verified.pk)
    if verified.status == VerifiedAnswer.Status.NEEDS_REVIEW:
        notify_needs_review(verified_id=verified.pk)


# Verified knowledge (routing.knowledge): a relied-on document replaced or deleted makes the answers
# built on it need review, whichever path replaced or deleted it (upload page, API, admin, synced
# folder, re-crawl). Model signals, since the documents app cannot import routing.


@receiver(post_save, sender="documents.Document", dispatch_uid="routing.knowledge_document_saved")
def knowledge_document_saved(sender, instance, created, update_fields=None, **kwargs) -> None:
    # Marked outdated by an owner (documents.services.document_mark_outdated names these fields):
    # the answers verified on it need review too.
    if not created and update_fields is not None and "outdated_at" in update_fields and instance.outdated_at:
        from routing.knowledge import document_outdated

        document_outdated(document=instance)
        return
    # A new version is saved whole (documents.services.document_replace_file); progress and
    # metadata writes name their fields and never change the version.
    if created or (update_fields is not None and "version" not in update_fields) or instance.version <= 1:
        return
    from routing.knowledge import documents_replaced

    documents_replaced(document=instance)


@receiver(pre_delete, sender="documents.Document", dispatch_uid="routing.knowledge_document_deleted")
def knowledge_document_deleted(sender, instance, **kwargs) -> None:
    from routing.knowledge import document_deleted

    document_deleted(document=instance)
