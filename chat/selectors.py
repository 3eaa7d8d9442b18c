"""Reads for the chat app. Every lookup of a session goes through `access.policy` (a chat is its
owner's alone): there is no path to a session that does not check it."""

from __future__ import annotations

from django.db.models import QuerySet

from access import policy
from chat.models import ChatSession, Message
from ragchat.services.types import ChatMessage

# How many earlier messages a turn considers before the token budget cuts them further.
HISTORY_MAX_MESSAGES = 20


def sessions_for_user(*, user) -> QuerySet[ChatSession]:
    return policy.sessions(user=user).order_by("-updated_at", "-created_at")


def session_for_user(*, user, session_id) -> ChatSession | None:
    return policy.session_or_none(user=user, session_id=session_id)


def session_messages(*, session: ChatSession) -> list[Message]:
    return list(session.messages.select_related("author").order_by("created_at", "id"))


def message_in_session(*, session_id, message_id) -> Message | None:
    return Message.objects.filter(session_id=session_id, pk=message_id).select_related("author").first()


def session_history(*, session_id, before: Message) -> list[ChatMessage]:
    """The conversation before `before`, oldest first, as the core's ChatMessages.

    Failed and interrupted answers are left out (they are not what the assistant said); an owner's
    answer counts as an assistant turn, marked so the model knows a person wrote it.
    """
    rows = list(
        Message.objects.filter(session_id=session_id, status=Message.Status.COMPLETE, id__lt=before.id)
        .exclude(content="")
        .order_by("-created_at", "-id")[:HISTORY_MAX_MESSAGES]
    )
    history: list[ChatMessage] = []
    for row in reversed(rows):
        if row.role == Message.Role.USER:
            history.append(ChatMessage(role="user", content=row.content, timestamp=row.created_at))
        elif row.role == Message.Role.OWNER:
            history.append(
                ChatMessage(role="assistant", content=f"(Answer from a person) {row.content}", timestamp=row.created_at)
            )
        else:
            history.append(ChatMessage(role="assistant", content=row.content, timestamp=row.created_at))
    return history
