"""`ws/chat/<session_id>/`: one open tab of a chat session.

Auth and ownership are checked before accept() (a stranger's handshake is refused; the origin is
checked by AllowedHostsOriginValidator in asgi.py). The consumer only validates and starts turns:
the answer itself is produced by chat.turns in a task the process owns, and reaches every tab of the
session through its channel group.

Frames in (htmx ws extension: the form's values as JSON): {"question": "..."} (with "edit": "<id>"
to ask the latest question again, edited), {"retry": "<id>"}, {"regenerate": "<id>"}, {"stop": "1", "answer": "<id of the answer>"}.
Frames out: HTML fragments with hx-swap-oob.

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.middleware.csrf import CSRF_ALLOWED_CHARS, CSRF_SECRET_LENGTH, get_token

from chat import presenters, selectors, services, turn_handover, turn_state, turns
from chat.models import ChatSession, Message
from chat.signals import session_opened
from chat.turn_fragments import MSG_BUSY, draft_article_html, group_send_html, note_html
from ragchat import processes
from ragchat.bounds import request_int
from ragchat.partials import render_partial
from ragchat.services.batching import Batcher

logger = logging.getLogger(__name__)

# Most sockets opened in one trip to the database thread (_connects).
CONNECT_BATCH = 64

MSG_REGENERATE_LAST = "Only the answer to the latest question can be regenerated."


class ChatConsumer(AsyncWebsocketConsumer):
    session_id: str
    group: str

    async def connect(self) -> None:
        user = self.scope.get("user")
        session_id = self.scope["url_route"]["kwargs"]["session_id"]
        query = parse_qs(self.scope.get("query_string", b"").decode())
        # A chat begun from the landing page (?start): where its first question stands is read
        # with the ownership check, in the same trip to the database thread.
        session, pending, answered = await _connects.submit(
            _Connect(user=user, session_id=session_id, start="start" in query)
        )
        if session is None:
            # Not signed in, or not the owner: refuse the handshake (absent and forbidden look alike).
            await self.close()
            return
        self.user = user
        self.csrf_input = _csrf_input(self.scope)
        self.session_id = str(session.pk)
        self.group = services.session_group_name(self.session_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self._catch_up(query, pending, answered)

    async def send(self, text_data: str | None = None, bytes_data: bytes | None = None, close: bool = False) -> None:
        """Every frame to this tab: a message's forms get a CSRF token for this tab's browser (one
        render goes to every tab of the session, perhaps other browsers), so they post without script."""
        if text_data and presenters.CSRF_SLOT in text_data:
            text_data = text_data.replace(presenters.csrf_slot_input(), self.csrf_input)
        await super().send(text_data=text_data, bytes_data=bytes_data, close=close)

    async def _catch_up(self, query: dict[str, list[str]], pending: Message | None, answered: int | None) -> None:
        """A tab that (re)connects mid-answer gets the draft as it stands; one whose page showed a
        draft that has finished since gets the final message; a new chat's page (?start) gets the
        answer to its first question: started now (`pending`), or as it stands (`answered`: begun
        since the page was rendered, by this socket before it reconnected or by another tab)."""
        turn = turn_state.active_turn(self.session_id)
        if turn is not None and turn.message_id:
            await self.send(text_data=turn.final_html or draft_article_html(turn))
        stored = answered  # a message sent as it is stored now
        for raw in query.get("sync", [])[:1]:
            stored = request_int(raw)  # the draft the page showed, finished since
        if stored is not None and (turn is None or stored != turn.message_id):
            await self._send_message(stored)
        if pending is not None and not await turn_handover.session_busy(self.session_id):
            # A chat begun from the landing page: its first question is stored, its answer starts
            # once the page listens (and only once: a question with an answer is not pending).
            await self._start(pending)

    async def disconnect(self, code: int) -> None:
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            data = json.loads(text_data or "{}")
        except json.JSONDecodeError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        if data.get("retry"):
            await self._retry(str(data["retry"]))
            return
        if data.get("regenerate"):
            await self._regenerate(str(data["regenerate"]))
            return
        if data.get("stop"):
            # The answer runs in the process its question reached: here, or another one, whose tabs
            # of this session hear the group event. The page says which answer it stops, so a stop
            # that arrives late (after that answer ended) cannot stop the next one.
            answer_id = request_int(data.get("answer") or "")
            if processes.hands_turns_over():  # the holder runs this process's turns
                await turn_handover.hand_over_stop(self.session_id, message_id=answer_id)
            elif not turn_state.turn_stop(self.session_id, message_id=answer_id):
                await self.channel_layer.group_send(self.group, {"type": "chat.stop", "message_id": answer_id})
            return
        question = str(data.get("question") or "")
        problem = services.question_problem(question)
        if problem:
            await self.send(text_data=note_html(problem, outcome="refused"))
            return
        if await turn_handover.session_busy(self.session_id):
            await self.send(text_data=note_html(MSG_BUSY, kind="info", outcome="busy"))
            return
        if data.get("edit"):
            await self._edit(str(data["edit"]), question.strip())
            return
        if processes.hands_turns_over():  # the holder runs this process's turns: store, then hand over
            asked = await database_sync_to_async(turn_handover.question_store)(
                user=self.user, session_id=self.session_id, question=question.strip()
            )
            if asked is None:  # deleted meanwhile
                await self.close()
                return
            session, user_message = asked
            await self.send(text_data=note_html(outcome="accepted"))
            await self._start(user_message, title=session.title)
            return

        async def accepted() -> None:
            await self.send(text_data=note_html(outcome="accepted"))

        try:
            turn = await turns.turn_ask(
                session_id=self.session_id, user=self.user, question=question.strip(), accepted=accepted
            )
        except turn_state.TurnInProgress:
            await self.send(text_data=note_html(MSG_BUSY, kind="info", outcome="busy"))
            return
        if turn is None:  # deleted meanwhile
            await self.close()

    async def _retry(self, raw_id: str) -> None:
        message_id = request_int(raw_id)
        if message_id is None:
            return
        failed = await database_sync_to_async(selectors.message_in_session)(
            session_id=self.session_id, message_id=message_id
        )
        retryable = (Message.Status.FAILED, Message.Status.INTERRUPTED)
        if failed is None or failed.status not in retryable or failed.reply_to_id is None:
            return
        if await turn_handover.session_busy(self.session_id):
            await self.send(text_data=note_html(MSG_BUSY, kind="info", transient=True))
            return
        user_message = await database_sync_to_async(lambda: failed.reply_to)()
        # The retry's answer takes the failed one's place: it leaves the page of every tab.
        await database_sync_to_async(services.message_discard_failed)(message=failed)
        await group_send_html(self.session_id, render_partial("chat/_removed.html", {"message_id": raw_id}))
        await self._start(user_message)

    async def _edit(self, raw_id: str, question: str) -> None:
        """The latest question asked again with new text: its answers leave every tab, the question
        shows its new text in place, and a new answer starts."""
        message = None
        message_id = request_int(raw_id)
        if message_id is not None:
            message = await database_sync_to_async(selectors.question_to_edit)(
                session_id=self.session_id, message_id=message_id
            )
        if message is None:
            await self.send(text_data=note_html(services.MSG_EDIT_LAST, outcome="refused"))
            return
        answers = await database_sync_to_async(lambda: list(message.replies.all()))()
        if await database_sync_to_async(presenters.route_statuses)(answers):
            await self.send(text_data=note_html(services.MSG_EDIT_ROUTED, outcome="refused"))
            return
        removed, title = await database_sync_to_async(services.question_edit)(message=message, content=question)
        await self.send(text_data=note_html(outcome="accepted"))
        for answer_id in removed:
            await group_send_html(self.session_id, render_partial("chat/_removed.html", {"message_id": answer_id}))
        # The turn's first frame shows the question with its new text, and the chat's new name.
        await self._start(message, title=title)

    async def _regenerate(self, raw_id: str) -> None:
        """A new answer to the session's last question; the earlier one stays as a version."""
        message_id = request_int(raw_id)
        if message_id is None:
            return
        answer = await database_sync_to_async(selectors.answer_to_regenerate)(
            session_id=self.session_id, message_id=message_id
        )
        if answer is None:
            await self.send(text_data=note_html(MSG_REGENERATE_LAST, kind="info"))
            return
        if await turn_handover.session_busy(self.session_id):
            await self.send(text_data=note_html(MSG_BUSY, kind="info", transient=True))
            return
        # The current answer becomes an older version (hidden, reachable by its switcher).
        number, count = await database_sync_to_async(selectors.answer_versions_of)(answer) or (1, 1)
        html = await database_sync_to_async(presenters.message_html)(answer, oob=True, versions=(number, count + 1))
        await group_send_html(self.session_id, html)
        question = await database_sync_to_async(lambda: answer.reply_to)()
        await self._start(question)

    async def _start(self, user_message: Message, *, title: str = "") -> None:
        if processes.hands_turns_over():
            await turn_handover.hand_over(
                session_id=self.session_id, user=self.user, user_message=user_message, title=title
            )
            return
        try:
            await turns.turn_start(session_id=self.session_id, user=self.user, user_message=user_message, title=title)
        except turn_state.TurnInProgress:
            await self.send(text_data=note_html(MSG_BUSY, kind="info", transient=True))

    async def _send_message(self, message_id: int) -> Message | None:
        message = await database_sync_to_async(selectors.message_in_session)(
            session_id=self.session_id, message_id=message_id
        )
        if message is not None:
            [message] = await database_sync_to_async(selectors.messages_as_seen_by)(user=self.user, messages=[message])
            html = await database_sync_to_async(presenters.message_html)(message, oob=True)
            await self.send(text_data=html)
        return message

    # ---- channel-group events ----------------------------------------------------------------
    async def dispatch(self, message: dict) -> None:
        # channels runs close_old_connections() on the one sync thread before every handler. Every
        # database call of this consumer goes through database_sync_to_async, which does that itself
        # before and after; the extra hop, queued behind every database call of the process, was
        # most of a streamed frame's cost with hundreds of streams and one more wait for every
        # question of a burst.
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message.get('type')}")
        await handler(message)

    async def chat_fragment(self, event: dict) -> None:
        """HTML rendered once by the turn, sent as is to every tab."""
        await self.send(text_data=event["html"])

    async def chat_stop(self, event: dict) -> None:
        turn_state.turn_stop(self.session_id, message_id=event.get("message_id"))

    async def chat_message(self, event: dict) -> None:
        """A stored message to show (e.g. the owner's answer delivered by routing): replaced if this
        tab shows it already, appended otherwise (chat.js appends an oob target that is missing).
        A person's answer that arrives in an open tab has been seen (the unread badge drops)."""
        message = await self._send_message(int(event["message_id"]))
        if message is not None and message.role == Message.Role.OWNER:
            await database_sync_to_async(self._opened)()

    def _opened(self) -> None:
        session = selectors.session_for_user(user=self.user, session_id=self.session_id)
        if session is not None:
            session_opened.send(sender=ChatSession, session=session, user=self.user)


@dataclass(frozen=True)
class _Connect:
    user: Any
    session_id: str
    start: bool


_Opened = tuple[ChatSession | None, Message | None, int | None]


def _sessions_and_pending(connects: list[_Connect]) -> list[_Opened | Exception]:
    """For each socket that connects: its session when the person owns it; with `start`, its
    question still waiting for an answer, or else the id of its latest message (its answer, begun
    since the page was rendered). A socket whose lookup fails fails alone."""
    opened: list[_Opened | Exception] = []
    for connect in connects:
        try:
            session = selectors.session_for_user(user=connect.user, session_id=connect.session_id)
            if session is None or not connect.start:
                opened.append((session, None, None))
            else:
                opened.append((session, *selectors.first_question_state(session_id=session.pk)))
        except Exception as e:
            opened.append(e)
    return opened


async def _open_sockets(connects: list[_Connect]) -> list[_Opened | Exception]:
    return await database_sync_to_async(_sessions_and_pending)(connects)


# Sockets that connect together share one trip to the database thread: a burst of new chats is a
# burst of handshakes, each waiting for its session before it may open, and one trip each queued
# the first questions' turns behind all of them.
_connects: Batcher[_Connect, _Opened] = Batcher(_open_sockets, max_batch=CONNECT_BATCH)


def _csrf_input(scope: dict) -> str:
    """The hidden CSRF field for the browser of this websocket: a fresh masking of its CSRF cookie,
    as get_token() gives a page ("" without a well-formed cookie: htmx's header still serves)."""
    secret = (scope.get("cookies") or {}).get(settings.CSRF_COOKIE_NAME, "")
    if len(secret) != CSRF_SECRET_LENGTH or not set(secret) <= set(CSRF_ALLOWED_CHARS):
        return ""
    token = get_token(_CookieOnly(secret))  # alphanumeric: nothing to escape
    return presenters.csrf_slot_input().replace(presenters.CSRF_SLOT, token)


class _CookieOnly:
    """What get_token() reads of a request: the CSRF secret from its cookie."""

    def __init__(self, secret: str) -> None:
        self.META = {"CSRF_COOKIE": secret}
