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


def messages_as_seen_by(*, user, messages: list[Message]) -> list[Message]:
    """The messages with their sources narrowed to documents the user may read now (one query):
    a person who has lost a tag since no longer sees that tag's snippets in old answers."""
    ids: set[str] = set()
    for m in messages:
        ids.update(policy.source_document_ids(m.citations))
        ids.update(policy.source_document_ids(m.passages))
    if not ids:
        return messages
    # A document deleted since is not withheld from the chat it answered (nobody else sees it, and
    # the asker could read it then); one that exists and the asker may no longer read is.
    readable = policy.readable_document_ids(user=user, document_ids=ids)
    readable |= ids - policy.existing_document_ids(document_ids=ids)
    for m in messages:
        cited = policy.visible_sources(user=user, sources=m.citations, readable=readable)
        given = policy.visible_sources(user=user, sources=m.passages, readable=readable)
        if m.role == Message.Role.ASSISTANT and (cited.withheld or given.withheld):
            # The text was written from them: withheld whole, in memory only (never saved).
            hidden = len({*policy.source_document_ids(m.citations), *policy.source_document_ids(m.passages)} - readable)
            m.content = WITHHELD_ANSWER.format(n=hidden, s="" if hidden == 1 else "s")
        m.citations, m.passages = cited.visible, given.visible
    return messages


WITHHELD_ANSWER = "_This answer drew on {n} document{s} you no longer have access to, so it is not shown._"
