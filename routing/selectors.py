"""Reads for routing: the inbox, one question with what its viewer may see, unread answers, figures.

Who may open a question, and what of the asker's context they may see, is decided by
`access.policy` (docs/access.md); a question the user may not open is a 404 — absent and forbidden
look alike.

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import timedelta

from django.db.models import QuerySet
from django.http import Http404
from django.utils import timezone

from access import policy
from chat.models import Message
from documents.models import PUBLIC_TAG_SLUG, Document
from ragchat.services.rag_service import STRATEGY_SMALLTALK
from routing.models import RoutedQuestion

FIGURES_WINDOW_DAYS = 90


def inbox_questions(*, user, status: str = RoutedQuestion.Status.OPEN) -> QuerySet[RoutedQuestion]:
    """The user's inbox, newest first (which questions belong in it: `policy.inbox_filter`)."""
    if not policy.is_signed_in(user):
        return RoutedQuestion.objects.none()
    return (
        RoutedQuestion.objects.filter(policy.inbox_filter(user=user), status=status)
        .select_related("asker", "tag", "target", "group", "answered_by", "feedback")
        .order_by("-created_at", "-id")
    )


@dataclass(frozen=True)
class InboxRow:
    """One line of the inbox: the newest open question of a group, and how many people asked it."""

    question: RoutedQuestion
    askers: int


def inbox_rows(*, user, limit: int = 200) -> list[InboxRow]:
    rows: list[InboxRow] = []
    seen_groups: dict[int, int] = {}
    for question in inbox_questions(user=user)[:limit]:
        if question.group_id is not None and question.group_id in seen_groups:
            index = seen_groups[question.group_id]
            rows[index] = InboxRow(rows[index].question, rows[index].askers + 1)
            continue
        if question.group_id is not None:
            seen_groups[question.group_id] = len(rows)
        rows.append(InboxRow(question, 1))
    return rows


def inbox_open_count(*, user) -> int:
    return inbox_questions(user=user).count()


def question_for_user(*, user, question_id) -> RoutedQuestion:
    """The question if the user may see it; Http404 otherwise."""
    try:
        key = int(question_id)
    except (TypeError, ValueError) as e:
        raise Http404("No such question.") from e
    question = (
        policy.visible_questions(user=user)
        .select_related(
            "asker",
            "tag",
            "tag__owner",
            "target",
            "answered_by",
            "session",
            "group",
            "published_document",
            "feedback",
            "message",
        )
        .filter(pk=key)
        .first()
    )
    if question is None:
        raise Http404("No such question.")
    return question


def group_questions(*, question: RoutedQuestion) -> list[RoutedQuestion]:
    """Every question of the group (the question itself when it has none), oldest first."""
    if question.group_id is None:
        return [question]
    return list(question.group.questions.select_related("asker").order_by("created_at", "id"))


def conversation_before(*, question: RoutedQuestion, limit: int = 12) -> list[Message]:
    """The asker's conversation up to the routed question (what the owner needs to understand it)."""
    anchor = question.question_message_id or question.message_id
    messages = Message.objects.filter(session_id=question.session_id, status=Message.Status.COMPLETE).exclude(
        content=""
    )
    if anchor is not None:
        messages = messages.filter(id__lt=anchor)
    rows = list(messages.select_related("author").order_by("-created_at", "-id")[:limit])
    return list(reversed(rows))


def _name(user) -> str:
    return (user.get_full_name() or user.get_username()) if user else ""


def route_statuses(message_ids: list[int]) -> dict[int, dict]:
    """For chat's answers that were sent to a person (chat.presenters asks, one query): to whom,
    under which tag, and whether they answered."""
    rows = list(
        RoutedQuestion.objects.filter(message_id__in=message_ids)
        .exclude(origin=RoutedQuestion.Origin.FEEDBACK)  # a review item is not "sent to a person"
        .select_related("tag", "target", "answered_by")
    )
    admins: dict[str, str] = {}  # tenant → "Ada Admin" / "Ada Admin and Bob Boss", looked up once

    def admin_names(tenant_id: str) -> str:
        if tenant_id not in admins:
            names = [_name(u) for u in policy.admins_of(tenant_id=tenant_id).order_by("first_name", "username")]
            admins[tenant_id] = (
                ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else (names[0] if names else "")
            )
        return admins[tenant_id]

    return {
        q.message_id: {
            "to": _name(q.target),
            "admins": admin_names(q.tenant_id) if (q.fallback or q.target is None) else "",
            "tag": q.tag.name if q.tag else "",
            "fallback": q.fallback or q.target is None,
            "answered": q.status == RoutedQuestion.Status.ANSWERED,
            "answered_by": _name(q.answered_by),
            "manual": q.origin == RoutedQuestion.Origin.MANUAL,
        }
        for q in rows
    }


def unread_answers(*, user) -> QuerySet[RoutedQuestion]:
    if user is None or not user.is_authenticated:
        return RoutedQuestion.objects.none()
    return RoutedQuestion.objects.filter(asker=user, status=RoutedQuestion.Status.ANSWERED, seen_at__isnull=True)


def unread_answer_count(*, user) -> int:
    return unread_answers(user=user).count()


def questions_asked_by(*, user) -> QuerySet[RoutedQuestion]:
    return (
        RoutedQuestion.objects.filter(asker=user)
        .select_related("tag", "answered_by", "session", "feedback")
        .order_by("-created_at", "-id")
    )


# ------------------------------------------------------------------------------------- figures


@dataclass(frozen=True)
class TagFigures:
    """R-ROUTE-7, over the last FIGURES_WINDOW_DAYS days.

    asked: answered questions (assistant answers, not greetings) at least one of whose retrieved
        passages came from a document carrying the tag — the questions the tag's documents were
        asked to answer. routed: routed questions (automatic or asked the owner) on the tag.
    """

    slug: str
    name: str
    asked: int
    routed: int
    open: int
    median_answer_seconds: float | None

    @property
    def share_routed(self) -> int | None:
        if not self.asked:
            return None
        return min(100, round(100 * self.routed / self.asked))

    @property
    def median_display(self) -> str:
        return format_duration(self.median_answer_seconds)


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{round(seconds)} s"
    if seconds < 3600:
        return f"{round(seconds / 60)} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


NO_TAG = ("", "No tag (admin)")


def figure_tags(*, user) -> list[tuple[str, str]]:
    """(slug, name) of the tags whose figures the user sees (`policy.figure_tags`), plus 'no tag'
    for admins."""
    pairs = [(t.slug, t.name) for t in policy.figure_tags(user=user).order_by("name")]
    if policy.may_see_untagged_figures(user=user):
        pairs.append(NO_TAG)
    return pairs


def _asked_by_tag(*, tenant_id: str, since) -> dict[str, int]:
    answers = Message.objects.filter(
        role=Message.Role.ASSISTANT,
        status=Message.Status.COMPLETE,
        session__owner__tenant_id=tenant_id,
        created_at__gte=since,
    ).exclude(query_strategy=STRATEGY_SMALLTALK)
    doc_ids_per_answer: list[set[str]] = []
    all_ids: set[str] = set()
    for passages, citations in answers.values_list("passages", "citations").iterator():
        ids = {p.get("document_id") for p in (passages or []) + (citations or []) if isinstance(p, dict)}
        ids.discard(None)
        doc_ids_per_answer.append(ids)
        all_ids |= ids
    tags_of: dict[str, set[str]] = {}
    for doc_id, slug in Document.objects.filter(id__in=list(all_ids)).values_list("id", "tags__slug"):
        if slug and slug != PUBLIC_TAG_SLUG:  # "public" is no topic: such answers count as "no tag"
            tags_of.setdefault(str(doc_id), set()).add(slug)
    counts: dict[str, int] = {}
    for ids in doc_ids_per_answer:
        slugs = set().union(*(tags_of.get(i, set()) for i in ids)) if ids else set()
        for slug in slugs or {""}:
            counts[slug] = counts.get(slug, 0) + 1
    return counts


def tag_figures(*, user, now=None) -> list[TagFigures]:
    if not policy.has_inbox(user=user):
        return []
    now = now or timezone.now()
    since = now - timedelta(days=FIGURES_WINDOW_DAYS)
    asked = _asked_by_tag(tenant_id=user.tenant_id, since=since)
    routed_rows = (
        RoutedQuestion.objects.filter(tenant_id=user.tenant_id, created_at__gte=since)
        .exclude(origin=RoutedQuestion.Origin.FEEDBACK)  # review items are not routed questions
        .values_list("tag__slug", "status", "created_at", "answered_at")
    )
    routed: dict[str, int] = {}
    open_: dict[str, int] = {}
    waits: dict[str, list[float]] = {}
    for slug, status, created, answered in routed_rows:
        key = slug or ""
        routed[key] = routed.get(key, 0) + 1
        if status == RoutedQuestion.Status.OPEN:
            open_[key] = open_.get(key, 0) + 1
        if answered is not None:
            waits.setdefault(key, []).append((answered - created).total_seconds())
    return [
        TagFigures(
            slug=slug,
            name=name,
            asked=asked.get(slug, 0),
            routed=routed.get(slug, 0),
            open=open_.get(slug, 0),
            median_answer_seconds=statistics.median(waits[slug]) if waits.get(slug) else None,
        )
        for slug, name in figure_tags(user=user)
    ]
