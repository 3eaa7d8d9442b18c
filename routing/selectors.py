"""Reads for routing: the inbox, one question with what its viewer may see, unread answers, figures.

Who may open a question, and what of the asker's context they may see, is decided by
`access.policy` (docs/access.md); a question the user may not open is a 404 — absent and forbidden
look alike.

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q, QuerySet
from django.http import Http404

from access import policy
from chat.models import Message
from routing import knowledge
from routing.models import RoutedQuestion


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
    """One line of the inbox: the newest open question of a group, and how many people asked it
    (distinct askers: the same person asking twice is one person)."""

    question: RoutedQuestion
    askers: int


def inbox_rows(*, user, limit: int = 200) -> list[InboxRow]:
    rows: list[list[RoutedQuestion]] = []  # each row: its group's open questions, newest first
    seen_groups: dict[int, int] = {}
    for question in inbox_questions(user=user)[:limit]:
        if question.group_id is not None and question.group_id in seen_groups:
            rows[seen_groups[question.group_id]].append(question)
            continue
        if question.group_id is not None:
            seen_groups[question.group_id] = len(rows)
        rows.append([question])
    return [InboxRow(questions[0], people_count(questions)) for questions in rows]


def inbox_open_count(*, user) -> int:
    """Open questions and review items (down-voted answers) in the user's inbox."""
    return inbox_questions(user=user).count()


def inbox_badge_count(*, user) -> int:
    """The navigation's inbox badge: everything waiting for the user (open questions, review items,
    verified knowledge that needs review)."""
    return inbox_open_count(user=user) + knowledge.needs_review_items(user).count()


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


def people_count(questions) -> int:
    """How many people asked these questions: distinct askers, not questions (the same person
    asking twice is one person). One home for "N people asked": inbox rows, the question page and
    the knowledge-gap report count this way."""
    return len({q.asker_id for q in questions})


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
    """For chat's answers that were sent to a person (chat.presenters asks): to whom, under which
    tag, and whether they answered. An answer whose question was sent with another version of it
    (regenerated before or after) shows its question's: one question, one routed question."""
    questions = dict(
        Message.objects.filter(pk__in=message_ids, role=Message.Role.ASSISTANT, reply_to__isnull=False).values_list(
            "pk", "reply_to_id"
        )
    )
    rows = list(
        RoutedQuestion.objects.filter(
            Q(message_id__in=message_ids) | Q(question_message_id__in=set(questions.values()))
        )
        .exclude(origin=RoutedQuestion.Origin.FEEDBACK)  # a review item is not "sent to a person"
        .select_related("tag", "target", "answered_by")
        .order_by("-created_at", "-id")  # the first of a question's wins below
    )
    by_message = {q.message_id: q for q in rows if q.message_id is not None}
    by_question = {q.question_message_id: q for q in rows if q.question_message_id is not None}
    admins: dict[str, str] = {}  # tenant → "Ada Admin" / "Ada Admin and Bob Boss", looked up once

    def admin_names(tenant_id: str) -> str:
        if tenant_id not in admins:
            names = [_name(u) for u in policy.admins_of(tenant_id=tenant_id).order_by("first_name", "username")]
            admins[tenant_id] = (
                ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else (names[0] if names else "")
            )
        return admins[tenant_id]

    found = {pk: by_message.get(pk) or by_question.get(questions.get(pk)) for pk in message_ids}
    return {
        pk: {
            "to": _name(q.target),
            "admins": admin_names(q.tenant_id) if (q.fallback or q.target is None) else "",
            "tag": q.tag.name if q.tag else "",
            "fallback": q.fallback or q.target is None,
            "answered": q.status == RoutedQuestion.Status.ANSWERED,
            "answered_by": _name(q.answered_by),
            "manual": q.origin == RoutedQuestion.Origin.MANUAL,
        }
        for pk, q in found.items()
        if q is not None
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
