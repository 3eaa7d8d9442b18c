"""Reads for the chat app. Every lookup of a session goes through `access.policy` (a chat is its
owner's alone): there is no path to a session that does not check it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import F, Q, QuerySet, Window
from django.db.models.functions import RowNumber

from access import policy
from chat.models import ChatSession, Message
from ragchat.services.citations import strip_source_ids
from ragchat.services.types import ChatMessage

# How many earlier messages a turn considers before the token budget cuts them further.
HISTORY_MAX_MESSAGES = 20


def sessions_for_user(*, user) -> QuerySet[ChatSession]:
    return policy.sessions(user=user).order_by("-updated_at", "-created_at")


SIDEBAR_SESSIONS = 100
SEARCH_RESULTS = 50
_MATCH_CONTEXT = 60


def sidebar_sessions(*, user) -> tuple[list[ChatSession], bool]:
    """The chats for the sidebar: pinned ones first, then the most recent, archived ones left out;
    and whether there are more (then search finds them)."""
    rows = list(
        sessions_for_user(user=user)
        .filter(archived_at__isnull=True)
        .order_by(F("pinned_at").desc(nulls_last=True), "-updated_at", "-created_at")[: SIDEBAR_SESSIONS + 1]
    )
    return rows[:SIDEBAR_SESSIONS], len(rows) > SIDEBAR_SESSIONS


def archived_sessions(*, user) -> QuerySet[ChatSession]:
    return sessions_for_user(user=user).filter(archived_at__isnull=False).order_by("-archived_at")


def archived_count(*, user) -> int:
    return sessions_for_user(user=user).filter(archived_at__isnull=False).count()


def _excerpt(text: str, query: str) -> str:
    flat = " ".join(strip_source_ids(text).replace("**", "").split())
    at = flat.lower().find(query.lower())
    if at < 0:
        return ""
    start, end = max(0, at - _MATCH_CONTEXT), min(len(flat), at + len(query) + _MATCH_CONTEXT)
    return ("…" if start else "") + flat[start:end] + ("…" if end < len(flat) else "")


def sessions_search(*, user, query: str) -> list[ChatSession]:
    """The person's chats whose title or messages mention `query` (case-insensitive), newest first;
    each carries `match`, an excerpt of the first message that mentions it. Messages are matched as
    the person sees them now: an answer withheld from them (a tag lost since) does not match."""
    query = " ".join(query.split())
    if not query:
        return []
    mine = sessions_for_user(user=user)
    candidates = list(
        Message.objects.filter(session__in=mine, content__icontains=query)
        .exclude(status=Message.Status.STREAMING)
        .order_by("session_id", "id")[:500]
    )
    matched: dict = {}
    for m in messages_as_seen_by(user=user, messages=candidates):
        if m.session_id not in matched and query.lower() in m.content.lower():
            matched[m.session_id] = _excerpt(m.content, query)
    rows = list(mine.filter(Q(title__icontains=query) | Q(pk__in=list(matched)))[:SEARCH_RESULTS])
    for row in rows:
        match = matched.get(row.pk, "")
        row.match = "" if match == row.title else match
    return rows


def session_for_user(*, user, session_id) -> ChatSession | None:
    return policy.session_or_none(user=user, session_id=session_id)


def session_messages(*, session: ChatSession) -> list[Message]:
    return list(session.messages.select_related("author").order_by("created_at", "id"))


def message_in_session(*, session_id, message_id) -> Message | None:
    return Message.objects.filter(session_id=session_id, pk=message_id).select_related("author").first()


def first_question_state(*, session_id) -> tuple[Message | None, int | None]:
    """Where a chat begun from the landing page stands when its page listens (?start): its last
    question when nothing answers it yet (the page's socket starts its answer), else the id of its
    latest message (the answer, begun since the page was rendered: by this page's socket before it
    reconnected, or by another tab of the chat)."""
    last = Message.objects.filter(session_id=session_id).order_by("-id").first()
    if last is None:
        return None, None
    if last.role == Message.Role.USER and not last.replies.exists():
        return last, None
    return None, last.pk


def answer_streaming_exists(*, session_id) -> bool:
    """An answer of the session is being written (by any process: the draft is in the database)."""
    return Message.objects.filter(session_id=session_id, status=Message.Status.STREAMING).exists()


def question_to_edit(*, session_id, message_id: int) -> Message | None:
    """The session's latest question, when `message_id` is it (only the latest can be edited and
    asked again: later turns were answered in the light of the earlier ones)."""
    last = Message.objects.filter(session_id=session_id, role=Message.Role.USER).order_by("-id").first()
    return last if last is not None and last.pk == message_id else None


def answer_to_regenerate(*, session_id, message_id: int) -> Message | None:
    """A finished answer of the session to its last question (the latest version), or None."""
    answer = (
        Message.objects.filter(
            session_id=session_id, pk=message_id, role=Message.Role.ASSISTANT, status=Message.Status.COMPLETE
        )
        .select_related("reply_to")
        .first()
    )
    if answer is None or answer.reply_to_id is None:
        return None
    last_question = (
        Message.objects.filter(session_id=session_id, role=Message.Role.USER)
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )
    newer = Message.objects.filter(reply_to_id=answer.reply_to_id, role=Message.Role.ASSISTANT, id__gt=answer.pk)
    return answer if last_question == answer.reply_to_id and not newer.exists() else None


def answer_versions(messages: list[Message]) -> dict[int, tuple[int, int]]:
    """For each assistant answer with siblings (a regenerated question): (its number, how many),
    oldest first; answers without siblings are left out."""
    groups: dict[int, list[int]] = {}
    for m in messages:
        if m.role == Message.Role.ASSISTANT and m.reply_to_id:
            groups.setdefault(m.reply_to_id, []).append(m.pk)
    return {pk: (i + 1, len(ids)) for ids in groups.values() if len(ids) > 1 for i, pk in enumerate(sorted(ids))}


def answer_versions_of(message: Message) -> tuple[int, int] | None:
    """(number, count) of one answer among its question's answers, or None when it is the only one."""
    if message.role != Message.Role.ASSISTANT or not message.reply_to_id:
        return None
    ids = list(
        Message.objects.filter(reply_to_id=message.reply_to_id, role=Message.Role.ASSISTANT)
        .order_by("id")
        .values_list("id", flat=True)
    )
    return (ids.index(message.pk) + 1, len(ids)) if len(ids) > 1 and message.pk in ids else None


def session_history(*, session_id, before: Message) -> list[ChatMessage]:
    """The conversation before `before`, oldest first, as the core's ChatMessages.

    Failed and interrupted answers are left out (they are not what the assistant said); an owner's
    answer counts as an assistant turn, marked so the model knows a person wrote it.
    """
    return sessions_history(questions=[(session_id, before)])[0]


def sessions_history(*, questions: Sequence[tuple[Any, Message]]) -> list[list[ChatMessage]]:
    """`session_history` of several (session id, before) pairs, one session each, in one query (a
    burst of questions): the latest HISTORY_MAX_MESSAGES of each session, ranked in the database."""
    if not questions:
        return []
    scope = Q()
    for session_id, before in questions:
        scope |= Q(session_id=session_id, id__lt=before.id)
    latest_first = [F("created_at").desc(), F("id").desc()]
    rows = (
        Message.objects.filter(scope, status=Message.Status.COMPLETE)
        .exclude(content="")
        .annotate(recent=Window(RowNumber(), partition_by=[F("session_id")], order_by=latest_first))
        .filter(recent__lte=HISTORY_MAX_MESSAGES)
        .order_by("session_id", *latest_first)
    )
    by_session: dict[str, list[Message]] = {}
    for row in rows:
        by_session.setdefault(str(row.session_id), []).append(row)
    return [_history(by_session.get(str(session_id), [])) for session_id, _ in questions]


def _history(rows: list[Message]) -> list[ChatMessage]:
    """A session's messages, latest first, as the conversation the core is told (oldest first)."""
    # A regenerated question has several answers: the conversation goes on from the latest.
    latest = {r.reply_to_id: r.id for r in sorted(rows, key=lambda r: r.id) if r.role == Message.Role.ASSISTANT}
    history: list[ChatMessage] = []
    for row in reversed(rows):
        if row.role == Message.Role.ASSISTANT and row.reply_to_id and latest.get(row.reply_to_id) != row.id:
            continue
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
            m.grounding = {}  # its sentences quote the withheld text
        m.citations, m.passages = cited.visible, given.visible
    return messages


WITHHELD_ANSWER = "_This answer drew on {n} document{s} you no longer have access to, so it is not shown._"
