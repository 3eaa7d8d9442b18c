"""Writes for the chat app, and the live channel of a session.

Other apps (routing) deliver a person's answer into an open session with `message_push()` (sync)
or `message_broadcast()` (async): the message is stored first, then every open tab of the session
receives it through the session's channel group and renders it.
"""

from __future__ import annotations

from collections.abc import Sequence

from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chat.models import DEFAULT_TITLE, ChatSession, Message
from ragchat import live

TITLE_MAX_CHARS = 80


def question_problem(text: str) -> str | None:
    """What is wrong with a question, or None: the one check of a question's length, for the
    websocket, the new-chat form and the API (R-CHAT-5 in docs/requirements.md; the
    QuestionTooShort/TooLong limits from settings.RAG); also what cannot be stored (PostgreSQL's
    text holds no NUL character)."""
    rag = settings.RAG
    if "\x00" in text:
        return "Your question contains a null character, which cannot be stored: please remove it."
    length = len(text.strip())
    if length < rag.question_min_chars:
        return f"Your question is too short: please write at least {rag.question_min_chars} characters."
    if length > rag.question_max_chars:
        return (
            f"Your question is too long ({length} characters): please keep it under "
            f"{rag.question_max_chars} characters."
        )
    return None


def session_group_name(session_id) -> str:
    """The channel group every open tab of a session joins."""
    return f"chat.session.{session_id}"


def session_create(*, user, title: str = "") -> ChatSession:
    return ChatSession.objects.create(owner=user, title=(title.strip()[:TITLE_MAX_CHARS] or DEFAULT_TITLE))


def session_rename(*, session: ChatSession, title: str) -> ChatSession:
    session.title = title.strip()[:TITLE_MAX_CHARS] or DEFAULT_TITLE
    session.save(update_fields=["title", "updated_at"])
    return session


def session_pin(*, session: ChatSession, pinned: bool) -> ChatSession:
    session.pinned_at = timezone.now() if pinned else None
    session.save(update_fields=["pinned_at"])  # not "updated_at": pinning is not news in the chat
    return session


def session_archive(*, session: ChatSession, archived: bool) -> ChatSession:
    session.archived_at = timezone.now() if archived else None
    session.save(update_fields=["archived_at"])
    return session


def session_delete(*, session: ChatSession) -> None:
    session.delete()


def message_discard_failed(*, message: Message) -> None:
    """A failed or interrupted answer that a retry replaces (the chat shows one answer per try)."""
    if message.status in (Message.Status.FAILED, Message.Status.INTERRUPTED):
        message.delete()


MSG_EMPTY_QUESTION = "Type your question first, then send it."
# Which question can be edited and asked again: the latest, unless it went to a person (they answer
# the question as it was asked). The answers after an earlier question were written in its light.
MSG_EDIT_LAST = (
    "Only your latest question can be edited: the answers after this one build on it. Ask a new question instead."
)
MSG_EDIT_ROUTED = "This question went to a person, so it stays as asked. Ask a new question instead."


def question_edit(*, message: Message, content: str) -> tuple[list[int], str]:
    """The asker's latest question, edited to be asked again: its answers (every version) go, the
    question keeps its place with the new text. A chat named after its first question is named
    after the new text when that question is edited (a name the asker gave it stays). Returns the
    ids of the answers removed and the chat's new name ("" when it keeps its name)."""
    with transaction.atomic():
        removed = list(message.replies.values_list("id", flat=True))
        Message.objects.filter(pk__in=removed).delete()
        named_after = _title_from_question(message.content)
        message.content = content
        message.save(update_fields=["content"])
        title = ""
        session = ChatSession.objects.select_for_update().get(pk=message.session_id)
        first = not Message.objects.filter(session=session, role=Message.Role.USER, id__lt=message.pk).exists()
        if first and session.title in (named_after, DEFAULT_TITLE) and session.title != _title_from_question(content):
            title = session.title = _title_from_question(content)
            session.save(update_fields=["title", "updated_at"])
    return removed, title


def _title_from_question(question: str) -> str:
    title = " ".join(question.split())
    return title if len(title) <= 60 else title[:59].rstrip() + "…"


def message_create_user(*, session: ChatSession, content: str) -> Message:
    """Store the asker's question; the first one also names an untitled session."""
    return messages_create_user(questions=[(session, content)])[0]


def messages_create_user(*, questions: Sequence[tuple[ChatSession, str]]) -> list[Message]:
    """Store questions of several sessions (one each) in one transaction, one insert and one update
    for all of them: a burst of questions is stored together. A session's first question names it
    if untitled (one more update, for the sessions it names).

    The time goes in a plain UPDATE (one value for all), the titles in bulk_update's CASE: a CASE
    of datetimes cost three times the titles' (0.44 against 0.12 ms a session, 64 at once)."""
    if not questions:
        return []
    now = timezone.now()
    with transaction.atomic():
        messages = Message.objects.bulk_create(
            [Message(session=session, role=Message.Role.USER, content=content) for session, content in questions]
        )
        named = []
        for session, content in questions:
            if session.title == DEFAULT_TITLE:
                session.title = _title_from_question(content)
                named.append(session)
            session.updated_at = now
        ChatSession.objects.filter(pk__in=[session.pk for session, _ in questions]).update(updated_at=now)
        if named:
            ChatSession.objects.bulk_update(named, ["title"])
    return messages


def session_start(*, user, question: str) -> tuple[ChatSession, Message]:
    """A new chat begins with its first question: no empty chats pile up."""
    with transaction.atomic():
        session = session_create(user=user)
        message = message_create_user(session=session, content=question.strip())
    return session, message


def message_create_draft(*, reply_to: Message) -> Message:
    """The answer's draft (streaming, empty) to this question, in its session."""
    return messages_create_draft(questions=[reply_to])[0]


def messages_create_draft(*, questions: Sequence[Message]) -> list[Message]:
    """The answers' drafts (streaming, empty) to these questions, in one statement."""
    return Message.objects.bulk_create(
        [
            Message(
                session_id=question.session_id,
                role=Message.Role.ASSISTANT,
                status=Message.Status.STREAMING,
                reply_to=question,
            )
            for question in questions
        ]
    )


def message_save_partials(*, contents: dict[int, str]) -> None:
    """Many streaming drafts' partial texts in one transaction (the chat's periodic batch)."""
    now = timezone.now()
    with transaction.atomic():
        for message_id, content in contents.items():
            Message.objects.filter(pk=message_id, status=Message.Status.STREAMING).update(
                content=content, updated_at=now
            )


MSG_PROCESS_STOPPED = "The server stopped while this answer was being written. Please try again."


def drafts_interrupt_stale(*, started_before) -> int:
    """Answers left streaming by a process that died (SIGKILL, a crash) before `started_before`:
    kept as interrupted (or failed when nothing streamed), with a reason and a retry. Only the one
    process that runs every chat turn may call it at its start. Returns how many."""
    stale = Message.objects.filter(status=Message.Status.STREAMING, created_at__lt=started_before)
    now = timezone.now()
    with transaction.atomic():
        failed = stale.filter(content="").update(
            status=Message.Status.FAILED, error=MSG_PROCESS_STOPPED, error_type="ProcessStopped", updated_at=now
        )
        interrupted = stale.update(
            status=Message.Status.INTERRUPTED, error=MSG_PROCESS_STOPPED, error_type="ProcessStopped", updated_at=now
        )
    return failed + interrupted


def message_finish(*, message: Message, fields: dict) -> Message:
    """Store the end of a turn (complete, interrupted or failed) in one write."""
    for name, value in fields.items():
        setattr(message, name, value)
    message.save()
    ChatSession.objects.filter(pk=message.session_id).update(updated_at=timezone.now())
    return message


def message_create_owner_answer(
    *, session: ChatSession, author, content: str, reply_to: Message | None = None
) -> Message:
    """A person's answer (tag owner or admin) in the asker's session; call message_push() after."""
    message = Message.objects.create(
        session=session, role=Message.Role.OWNER, author=author, content=content, reply_to=reply_to
    )
    ChatSession.objects.filter(pk=session.pk).update(updated_at=timezone.now())
    return message


def _message_event(message: Message) -> tuple[str, dict]:
    return session_group_name(message.session_id), {"type": "chat.message", "message_id": message.pk}


async def message_broadcast(*, message: Message) -> None:
    """Tell every open tab of the message's session to render it (appended, or replaced if shown)."""
    await get_channel_layer().group_send(*_message_event(message))


def message_push(*, message: Message) -> None:
    """Sync form of message_broadcast() for views and signal handlers (after the row is committed);
    pushes to one session reach its tabs in the order they were made (ragchat.live)."""
    transaction.on_commit(lambda: live.group_send(*_message_event(message)))
