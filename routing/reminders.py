"""Reminders and the daily digest (issue 13): `run_due(now)` does whatever is due, and nothing twice.

- **Reminders**: an open routed question or review item, or verified knowledge that needs review,
  waiting longer than its target (the tag's `target_hours`; the admins' fallback items:
  RAGCHAT_FALLBACK_TARGET_HOURS) reminds the people who answer for it now
  (`services.responsible_for`: the tag's current owner, else the admins) once per target period.
  Each person gets one email listing their due items. An item is claimed by a conditional update
  of its `reminded_at` before anyone is told, so two processes running at once remind once.
- **Daily digest**: each person who chose it gets, once a day after RAGCHAT_DIGEST_HOUR (local
  time), one email of what waits for them (only what their inbox shows them: `policy.inbox_filter`,
  `policy.reverify_filter`), the longest waiting first, and what is new since their last digest.
  Nothing waiting: no email. `last_digest_at` is claimed the same way as `reminded_at`.

Who runs it: the server's schedule (documents/schedule.py, with in-process ingestion), or
`manage.py send_reminders` from cron or a systemd timer (the "tasks" backend).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from access import policy
from documents.models import Tag
from routing import knowledge, selectors
from routing.figures import format_duration
from routing.models import NotificationPreference, RoutedQuestion, VerifiedAnswer
from routing.notifications import Kind, absolute_url, email_people
from routing.services import display_name, responsible_for

logger = logging.getLogger(__name__)

DEFAULT_FALLBACK_TARGET_HOURS = 48
DEFAULT_DIGEST_HOUR = 7


def target_period(*, tag: Tag | None, fallback: bool) -> timedelta:
    """How long an item may wait: its tag's target when the tag's owner answers for it; the
    admins' fallback target otherwise."""
    if tag is not None and not fallback:
        hours = tag.target_hours
    else:
        hours = getattr(settings, "RAGCHAT_FALLBACK_TARGET_HOURS", DEFAULT_FALLBACK_TARGET_HOURS)
    return timedelta(hours=max(1, int(hours)))


@dataclass
class Item:
    """One line of a reminder or digest: a question, review item or re-verify item."""

    kind: str  # "question" | "review" | "verified"
    text: str
    topic: str
    since: datetime
    url: str
    people: int = 1  # askers of a question group
    note: str = ""
    waited: str = ""  # how long it has waited, as of the email

    @property
    def label(self) -> str:
        return {"question": "Question", "review": "Review item", "verified": "Needs review"}[self.kind]


def _waited(items: list[Item], now: datetime) -> list[Item]:
    for item in items:
        item.waited = format_duration((now - item.since).total_seconds())
    return items


def _question_item(q: RoutedQuestion) -> Item:
    review = q.origin == RoutedQuestion.Origin.FEEDBACK
    note = ""
    if review and q.feedback is not None:
        note = f"down-voted: {q.feedback.get_reason_display().lower() if q.feedback.reason else 'no reason given'}"
    return Item(
        kind="review" if review else "question",
        text=q.question.strip(),
        topic=q.tag.name if q.tag else "no topic",
        since=q.created_at,
        url=absolute_url(reverse("routing:question", args=[q.pk])),
        note=note,
    )


def _verified_item(v: VerifiedAnswer) -> Item:
    return Item(
        kind="verified",
        text=v.question.strip(),
        topic=v.tag.name,
        since=v.needs_review_since or v.updated_at,
        url=absolute_url(reverse("routing:inbox")),
        note=v.needs_review_reason,
    )


def _grouped(questions) -> list[tuple[RoutedQuestion, int]]:
    """Questions of one group count once (with how many people asked)."""
    rows: dict[object, list] = {}
    for q in questions:
        key = ("g", q.group_id) if q.group_id else ("q", q.pk)
        if key in rows:
            rows[key][1] += 1
        else:
            rows[key] = [q, 1]
    return [(q, n) for q, n in rows.values()]


# ------------------------------------------------------------------------------------- reminders


def _claim(model, obj, now: datetime, **still) -> bool:
    """Take the item's reminder for this run: only the process whose update finds `reminded_at`
    unchanged since it read it (and the item still in `still`) reminds."""
    return model.objects.filter(pk=obj.pk, reminded_at=obj.reminded_at, **still).update(reminded_at=now) == 1


def _due(*, since: datetime, reminded_at: datetime | None, period: timedelta, now: datetime) -> bool:
    return now - since >= period and (reminded_at is None or now - reminded_at >= period)


def send_reminders(now: datetime) -> int:
    """Remind the people who answer for every item waiting past its target; returns emails sent."""
    per_person: dict[int, tuple[object, list[Item]]] = {}

    def add(user, item: Item) -> None:
        per_person.setdefault(user.pk, (user, []))[1].append(item)

    # No target is shorter than an hour: what is younger, or was reminded within the hour, is not due.
    hour_ago = now - timedelta(hours=1)
    not_just_reminded = Q(reminded_at__isnull=True) | Q(reminded_at__lte=hour_ago)
    questions = (
        RoutedQuestion.objects.filter(not_just_reminded, status=RoutedQuestion.Status.OPEN, created_at__lte=hour_ago)
        .select_related("tag", "tag__owner", "feedback")
        .order_by("created_at", "id")
    )
    due_questions: dict[int, list[RoutedQuestion]] = {}
    for q in questions.iterator():
        responsible = responsible_for(tenant_id=q.tenant_id, tag=q.tag)
        period = target_period(tag=q.tag, fallback=responsible.fallback)
        if not _due(since=q.created_at, reminded_at=q.reminded_at, period=period, now=now):
            continue
        if not _claim(RoutedQuestion, q, now, status=RoutedQuestion.Status.OPEN):
            continue  # another process reminded, or it was answered meanwhile
        for user in responsible.users:
            if policy.may_answer(user=user, question=q):  # never about an item they may not open
                due_questions.setdefault(user.pk, []).append(q)
                per_person.setdefault(user.pk, (user, []))
    for user_pk, qs in due_questions.items():
        user = per_person[user_pk][0]
        for q, people in _grouped(qs):
            item = _question_item(q)
            item.people = people
            add(user, item)

    verified = (
        VerifiedAnswer.objects.filter(not_just_reminded, status=VerifiedAnswer.Status.NEEDS_REVIEW)
        .select_related("tag", "tag__owner")
        .order_by("needs_review_since", "id")
    )
    for v in verified.iterator():
        responsible = responsible_for(tenant_id=v.tenant_id, tag=v.tag)
        period = target_period(tag=v.tag, fallback=responsible.fallback)
        if not _due(since=v.needs_review_since or v.updated_at, reminded_at=v.reminded_at, period=period, now=now):
            continue
        if not _claim(VerifiedAnswer, v, now, status=VerifiedAnswer.Status.NEEDS_REVIEW):
            continue
        for user in responsible.users:
            if VerifiedAnswer.objects.filter(policy.reverify_filter(user=user), pk=v.pk).exists():
                add(user, _verified_item(v))

    sent = 0
    for user, items in per_person.values():
        if not items:
            continue
        items.sort(key=lambda i: i.since)
        subject = f"[ragchat] Reminder: {len(items)} item{'s' if len(items) != 1 else ''} waiting past the target time"
        body = render_to_string(
            "routing/email/reminder.txt",
            {
                "name": display_name(user),
                "items": _waited(items, now),
                "inbox_url": absolute_url(reverse("routing:inbox")),
                "settings_url": absolute_url(reverse("routing:notifications")),
            },
        )
        if email_people(users=[user], kind=Kind.REMINDERS, subject=subject, body=body):
            sent += 1
    return sent


# ------------------------------------------------------------------------------------- digest


def digest_slot(now: datetime) -> datetime:
    """The latest digest time at or before `now`: today's RAGCHAT_DIGEST_HOUR (local), or yesterday's."""
    hour = int(getattr(settings, "RAGCHAT_DIGEST_HOUR", DEFAULT_DIGEST_HOUR)) % 24
    local = timezone.localtime(now)
    slot = local.replace(hour=hour, minute=0, second=0, microsecond=0)
    return slot if slot <= local else slot - timedelta(days=1)


@dataclass
class Digest:
    questions: list[Item] = field(default_factory=list)
    reviews: list[Item] = field(default_factory=list)
    verified: list[Item] = field(default_factory=list)
    since: datetime | None = None

    @property
    def items(self) -> list[Item]:
        return sorted(self.questions + self.reviews + self.verified, key=lambda i: i.since)

    @property
    def empty(self) -> bool:
        return not (self.questions or self.reviews or self.verified)

    @property
    def new(self) -> list[Item]:
        return [i for i in self.items if self.since is None or i.since > self.since]


def digest_for(*, user, since: datetime | None) -> Digest:
    """What waits for the person, as their inbox shows it (nothing they may not open)."""
    digest = Digest(since=since)
    if not policy.has_inbox(user=user):
        return digest
    for q, people in _grouped(selectors.inbox_questions(user=user).select_related("feedback")):
        item = _question_item(q)
        item.people = people
        (digest.reviews if item.kind == "review" else digest.questions).append(item)
    digest.verified = [_verified_item(v) for v in knowledge.needs_review_items(user)]
    return digest


def send_digests(now: datetime) -> int:
    """Every daily digest due at `now` (one per person per day); returns emails sent."""
    slot = digest_slot(now)
    due = NotificationPreference.objects.filter(digest=NotificationPreference.Digest.DAILY).filter(
        Q(last_digest_at__isnull=True) | Q(last_digest_at__lt=slot)
    )
    sent = 0
    for pref in due.select_related("user"):
        claimed = NotificationPreference.objects.filter(pk=pref.pk, last_digest_at=pref.last_digest_at).update(
            last_digest_at=now
        )
        if not claimed:
            continue  # another process sent it
        user = pref.user
        digest = digest_for(user=user, since=pref.last_digest_at or now - timedelta(days=1))
        if digest.empty:
            continue
        items = _waited(digest.items, now)
        subject = f"[ragchat] Your daily digest: {len(items)} item{'s' if len(items) != 1 else ''} waiting"
        body = render_to_string(
            "routing/email/digest.txt",
            {
                "name": display_name(user),
                "digest": digest,
                "longest": items[:3],
                "inbox_url": absolute_url(reverse("routing:inbox")),
                "settings_url": absolute_url(reverse("routing:notifications")),
            },
        )
        if email_people(users=[user], kind=Kind.DIGEST, subject=subject, body=body):
            sent += 1
    return sent


def run_due(now: datetime | None = None) -> dict:
    """Send every reminder and digest due at `now`. Idempotent: a second run sends nothing more."""
    now = now or timezone.now()
    done = {"reminders": send_reminders(now), "digests": send_digests(now)}
    if any(done.values()):
        logger.info("reminders sent", extra={"event": "reminders_sent", **done})
    return done
