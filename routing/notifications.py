"""How people are told (issue 13): live on their channel group, and by email as their notification
preferences allow. Every email and live push of the knowledge loop goes through here.

Kinds of email (one switch each on NotificationPreference; no row = every switch on, no digest):
questions (new routed questions to an owner), reviews (review items and re-verify items), reminders
(items waiting past the tag's target time), answers (answers and corrections to an asker). The
daily digest (routing/reminders.py) is the `digest` choice. People choose on their notification
settings page (routing:notifications).

Every email goes out through `send_email`, and never on the database thread while the server runs:
from sync code that the server's event loop runs in a worker thread (a consumer's
`database_sync_to_async`, the `transaction.on_commit` hooks there, a sync view, the schedule's
reminders) the email is queued to one mail thread and sent after the call returned, in the order
queued (ragchat.mail); elsewhere (`manage.py send_reminders`, a worker process, a sync test) it is
sent before the call returns. A failed send is logged ("routing: email failed") and never undoes
what was done; what is queued when the process ends is sent first.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from enum import StrEnum

from django.conf import settings
from django.core.mail import EmailMessage

from ragchat import mail
from ragchat.live import group_send
from routing.models import NotificationPreference

logger = logging.getLogger(__name__)


class Kind(StrEnum):
    QUESTIONS = "questions"
    REVIEWS = "reviews"
    REMINDERS = "reminders"
    ANSWERS = "answers"
    DIGEST = "digest"


_FIELD = {
    Kind.QUESTIONS: "email_questions",
    Kind.REVIEWS: "email_reviews",
    Kind.REMINDERS: "email_reminders",
    Kind.ANSWERS: "email_answers",
}


def user_group_name(user_id) -> str:
    """The channel group of one user's open pages (inbox and navigation badges)."""
    return f"routing.user.{user_id}"


def absolute_url(path: str) -> str:
    return settings.RAGCHAT_BASE_URL.rstrip("/") + path


def preference_of(user) -> NotificationPreference:
    """The person's preferences; an unsaved row with the defaults when they never chose."""
    pref = NotificationPreference.objects.filter(user=user).first()
    return pref if pref is not None else NotificationPreference(user=user)


def wants_email(user, kind: Kind) -> bool:
    if not user.email or not user.is_active:
        return False
    pref = preference_of(user)
    if kind == Kind.DIGEST:
        return pref.digest == NotificationPreference.Digest.DAILY
    return bool(getattr(pref, _FIELD[kind]))


def push(user_ids: Iterable, event: dict) -> None:
    """A live event to every open page of these people."""
    for user_id in dict.fromkeys(user_ids):
        group_send(user_group_name(user_id), event)


def badges_changed(user_ids: Iterable) -> None:
    """These people's open pages re-count their navigation badges (ws/nav/, ws/inbox/)."""
    push(user_ids, {"type": "nav.badges"})


def send_email(*, subject: str, body: str, to: list[str]) -> None:
    """One email, sent now or queued to the mail thread (see above); a failure is logged, never raised."""
    mail.send(EmailMessage(subject, body, settings.DEFAULT_FROM_EMAIL, to), failed=_email_failed)


def _email_failed(error: Exception) -> None:
    logger.error("routing: email failed: %s", error, extra={"event": "routing_email_failed"})


def email_people(*, users: Iterable, kind: Kind, subject: str, body: str) -> list[str]:
    """Email the people among `users` who want this kind of email; returns the addresses it went to
    (sent, or queued to be sent)."""
    addresses = sorted({u.email for u in users if wants_email(u, kind)})
    if addresses:
        send_email(subject=subject, body=body, to=addresses)
    return addresses
