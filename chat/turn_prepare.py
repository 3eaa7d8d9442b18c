"""What a turn needs before its search, prepared for the questions that arrive together in one trip
to the database thread: the question stored (or a stored one taken again), its draft created, the
question's HTML, the asker's tags and glossary, the conversation so far.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.db import transaction

from chat import presenters, selectors, services
from chat.models import ChatSession, Message
from chat.turn_state import TurnInputs
from ragchat.services.batching import Batcher

# Most questions prepared in one trip to the database thread (preparer).
PREPARE_BATCH = 64


@dataclass(frozen=True)
class Ask:
    """What a turn needs prepared: a new question to store (`question`), or a stored one to answer
    again (`message`: a retry, a regenerate, an edit, a chat begun from the landing page, the API)."""

    user: Any
    session_id: str
    question: str = ""
    message: Message | None = None


@dataclass(frozen=True)
class Prepared:
    question: Message
    draft: Message
    user_html: str
    inputs: TurnInputs
    title: str = ""


async def _prepare_asks(asks: list[Ask]) -> list[Prepared | None | Exception]:
    return await database_sync_to_async(prepare_batch)(asks)


# Questions that arrive together are prepared in one trip to the database thread.
#
# Before its search a turn needs its question stored, its draft created and the question's HTML,
# the asker's tags and glossary and the conversation so far: nine statements one by one. In a burst
# every trip to the process's one database thread waits behind all the others', and every statement
# gives Python's GIL away and waits to get it back from the busy event loop (a burst of 200
# questions spent 15 ms a question there against 3.5 ms alone). An ask that finds the preparer idle
# goes at once; asks that arrive while a batch runs go together into the next one (at most
# PREPARE_BATCH), stored with a few statements for all of them.
preparer: Batcher[Ask, Prepared | None] = Batcher(_prepare_asks, max_batch=PREPARE_BATCH)


def prepare_batch(asks: list[Ask]) -> list[Prepared | None | Exception]:
    """Every ask prepared, in order (None: its session is gone or not the asker's). The writes go in
    one transaction; if it fails, each ask's writes are tried alone, so one bad ask (its session
    deleted meanwhile) fails only itself. The reads that follow are never retried: they would not
    redo the writes."""
    try:
        stored: list[_Stored | None | Exception] = list(_store_asks(asks))
    except Exception:
        if len(asks) == 1:
            raise
        stored = []
        for ask in asks:
            try:
                stored.extend(_store_asks([ask]))
            except Exception as e:
                stored.append(e)
    ready = [(ask, item) for ask, item in zip(asks, stored, strict=True) if isinstance(item, _Stored)]
    prepared = iter(_with_inputs(ready))
    return [next(prepared) if isinstance(item, _Stored) else item for item in stored]


@dataclass(frozen=True)
class _Stored:
    question: Message
    draft: Message
    title: str


def _store_asks(asks: list[Ask]) -> list[_Stored | None]:
    """The new questions stored, each in a session its asker owns (checked by the access policy, one
    query per asker), and every ask's draft: one transaction of a few statements for the batch."""
    from access.policy import owned_sessions

    sessions: dict[int, ChatSession] = {}
    by_user: dict[Any, list[int]] = {}
    for i, ask in enumerate(asks):
        if ask.message is None:
            by_user.setdefault(ask.user.pk, []).append(i)
    for indexes in by_user.values():
        owned = owned_sessions(user=asks[indexes[0]].user, session_ids=[asks[i].session_id for i in indexes])
        for i in indexes:
            if (session := owned.get(asks[i].session_id)) is not None:
                sessions[i] = session
    new = sorted(sessions)
    with transaction.atomic():
        fresh = services.messages_create_user(questions=[(sessions[i], asks[i].question) for i in new])
        questions = {i: ask.message for i, ask in enumerate(asks) if ask.message is not None}
        questions.update(zip(new, fresh, strict=True))
        order = sorted(questions)
        drafts = services.messages_create_draft(questions=[questions[i] for i in order])
    by_index = dict(zip(order, drafts, strict=True))
    return [
        _Stored(questions[i], by_index[i], sessions[i].title if i in sessions else "") if i in questions else None
        for i in range(len(asks))
    ]


def _with_inputs(ready: list[tuple[Ask, _Stored]]) -> list[Prepared]:
    """Each stored ask with its question's HTML (an upsert: appended when new, replaced in place when
    the page shows it already) and its turn's inputs: the history of every session in one query, the
    tags and glossary once per asker."""
    from access.policy import readable_tag_slugs
    from documents.selectors import glossary_entries_for

    histories = selectors.sessions_history(questions=[(ask.session_id, item.question) for ask, item in ready])
    readers: dict[Any, tuple[list[str], list[Any]]] = {}
    prepared = []
    for (ask, item), history in zip(ready, histories, strict=True):
        if ask.user.pk not in readers:
            readers[ask.user.pk] = (readable_tag_slugs(user=ask.user), glossary_entries_for(user=ask.user))
        tags, glossary = readers[ask.user.pk]
        prepared.append(
            Prepared(
                question=item.question,
                draft=item.draft,
                user_html=presenters.message_html(item.question, oob=True),
                inputs=TurnInputs(tags=tags, glossary=glossary, history=history),
                title=item.title,
            )
        )
    return prepared
