"""One chat turn, run as a task owned by the process, not by a websocket consumer.

Daphne cancels a consumer about 10 s after its socket closes, so a turn started from a consumer
lives in this module's registry instead: it streams the RAG core's events to the session's channel
group (every open tab sees them; a closed tab loses nothing), has its partial text saved about every
SAVE_SECONDS, and stores the final (or interrupted / failed) assistant message at the end.

Tokens are coalesced: the first one goes out at once (time-to-first-token), later ones in frames
each carrying the whole draft rendered as the final answer will be (Markdown, markers), so the final
render replaces the draft without a layout jump. Per token nothing touches the database or the
channel layer:
- the draft is rendered incrementally (chat.rendering.DraftRenderer: settled blocks once, then only
  the open tail), so a frame costs what is new, not the whole answer again;
- frames are paced by load: at least FLUSH_SECONDS apart, and spaced so that all streams' frames
  together take at most FLUSH_LOOP_SHARE of the event loop (50 ms with a few streams, longer with
  hundreds; never more than FLUSH_MAX_SECONDS);
- partial texts are saved by one process-wide writer: every SAVE_SECONDS, one database call (one
  transaction) stores every draft that grew, however many streams run.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction

from chat import presenters, selectors, services
from chat.models import ChatSession, Message
from chat.rendering import DraftRenderer
from chat.signals import answer_completed
from ragchat import processes, runtime
from ragchat.partials import render_partial
from ragchat.services.batching import Batcher
from ragchat.services.errors import (
    CollectionMismatchError,
    ContextError,
    EmptyAnswerError,
    LLMConnectionError,
    LLMResponseError,
    LLMTimeoutError,
    ModelNotAllowedError,
    ModelUnavailableError,
    RAGServiceError,
)
from ragchat.services.retrieval import build_retrieval_query
from ragchat.services.types import ContextEvent, FinalEvent, RAGRequest, RAGResponse, StageEvent, TokenEvent

logger = logging.getLogger(__name__)

FLUSH_SECONDS = 0.05
FLUSH_MAX_SECONDS = 1.0
FLUSH_LOOP_SHARE = 0.3
# Sending a frame (channel layer, a tab's consumer, websocket write), on top of its measured render
# time: about 0.4 ms measured with 200 streams (py-spy, in-memory layer).
FRAME_SEND_SECONDS = 0.0004
SAVE_SECONDS = 0.5  # one batched write for all streams: cheap enough to keep the drafts fresh
# Longest pause of an answer that gives way to questions waiting for their first token (_FirstTokens):
# a burst of 200 questions gets its first tokens out in about that time.
GIVE_WAY_MAX_SECONDS = 3.0
# Most questions prepared in one trip to the database thread (_Preparer).
PREPARE_BATCH = 64

# Wording of the error table in docs/specs/rag-service-spec-v1-draft.md §Error Responses (R-CHAT-7 in
# docs/requirements.md); the search one is ours (the table has no such row).
MSG_TIMEOUT = "Response generation timed out. Please try again."
MSG_UNAVAILABLE = "AI service temporarily unavailable."
MSG_MODEL = "Requested model not available."
MSG_SEARCH = "Document search is temporarily unavailable. Please try again."
MSG_REINDEX = (
    "Document search is unavailable: the search index was built with another embedding model than the one "
    "configured. An administrator must re-index the documents (manage.py reindex)."
)
MSG_UNKNOWN = "Something went wrong while answering. Please try again."
MSG_STOPPED = "You stopped this answer."
MSG_EMPTY = "The model returned no answer this time. Please try again or choose another model."


def error_sentence(error: BaseException) -> str:
    if isinstance(error, LLMTimeoutError):
        return MSG_TIMEOUT
    if isinstance(error, (ModelUnavailableError, ModelNotAllowedError)):
        return MSG_MODEL
    if isinstance(error, EmptyAnswerError):
        return MSG_EMPTY
    if isinstance(error, (LLMConnectionError, LLMResponseError)):
        return MSG_UNAVAILABLE
    if isinstance(error, CollectionMismatchError):  # not passing: until re-indexed (README "Upgrading")
        return MSG_REINDEX
    if isinstance(error, ContextError):
        return MSG_SEARCH
    return MSG_UNKNOWN


class TurnInProgress(Exception):
    """The session already has an answer being written."""


@dataclass(frozen=True)
class TurnEvent:
    """What a caller other than the session's tabs (the JSON API) hears of a turn, in order:
    "stage" (text: the stage), "token" (text: the new text), then "final" (message: the stored
    answer, after the routing signal ran) or, if the task died without one, "closed"."""

    kind: str
    text: str = ""
    message: Message | None = None


@dataclass
class Turn:
    session_id: str
    message_id: int
    question: str
    stage: str = "searching"
    text: str = ""
    passages: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    task: asyncio.Task | None = None
    renderer: DraftRenderer | None = None
    body_shell: tuple[str, str] | None = None  # the streamed frame's wrapper around the body
    stopped: bool = False  # the asker pressed Stop: the task is cancelled, the partial text kept
    listeners: list[asyncio.Queue] = field(default_factory=list)  # TurnEvents for non-websocket callers
    model: str | None = None
    request_id: str | None = None
    inputs: TurnInputs | None = None  # read with the draft, in the turn's one trip before its search
    waits_first_token: bool = False  # counted by _first_tokens until its first token is out
    gave_way_in: int = -1  # the burst (_first_tokens.epoch) this answer last gave way in
    marks: dict[str, float] = field(default_factory=lambda: {"asked": time.time()})  # step -> wall time
    core_timings: dict[str, float] = field(default_factory=dict)  # the core's own (embed, search, ...), ms

    def mark(self, step: str) -> None:
        """When the turn reached a step (settings.RAGCHAT_TURN_TIMELINE: where a burst's time goes)."""
        self.marks.setdefault(step, time.time())

    @property
    def prefix(self) -> str:
        return f"m{self.message_id}"


_turns: dict[str, Turn] = {}


@dataclass(frozen=True)
class TurnInputs:
    """What the core is told about the asker and the conversation: the tags they may read, their
    glossary, the history before the question."""

    tags: list[str]
    glossary: list[Any]
    history: list[Any]


class _FirstTokens:
    """First tokens first: while questions of this process wait for their first token, answers that
    already show text give way (once per burst, GIVE_WAY_MAX_SECONDS at most).

    In a burst every question's work before its first token (its trip to the database thread, the
    search, the request to the model) queues behind whatever else the process does, and streaming
    two hundred answers is most of that: each token is parsed, filtered, rendered and sent. An answer
    that gives way stops reading its model's stream (the tokens wait in the socket and go out in one
    frame when it goes on) and a finished one waits before it is stored, rated and routed. An answer
    gives way at most once while the same questions wait (`epoch` counts the times the process had
    none waiting), so under a load that never lets up every answer still streams, paused once.
    """

    def __init__(self) -> None:
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Waiting] = weakref.WeakKeyDictionary()

    def _state(self) -> _Waiting:
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            state = self._loops[loop] = _Waiting()
        return state

    def begin(self, turn: Turn) -> None:
        if not turn.waits_first_token:
            turn.waits_first_token = True
            self._state().count += 1

    def end(self, turn: Turn) -> None:
        if not turn.waits_first_token:
            return
        turn.waits_first_token = False
        state = self._state()
        state.count -= 1
        if state.count <= 0:
            state.count = 0
            state.epoch += 1
            waiters, state.waiters = state.waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    @property
    def waiting(self) -> int:
        return self._state().count

    async def give_way(self, turn: Turn) -> None:
        """Pause this answer while questions wait for their first token (see the class)."""
        state = self._state()
        if state.count == 0 or turn.gave_way_in == state.epoch:
            return
        turn.gave_way_in = state.epoch
        waiter = asyncio.get_running_loop().create_future()
        state.waiters.append(waiter)
        try:
            async with asyncio.timeout(GIVE_WAY_MAX_SECONDS):
                await waiter
        except TimeoutError:
            pass
        finally:
            if waiter in state.waiters:
                state.waiters.remove(waiter)


@dataclass
class _Waiting:
    count: int = 0
    epoch: int = 0
    waiters: list[asyncio.Future] = field(default_factory=list)


_first_tokens = _FirstTokens()


def active_turn(session_id) -> Turn | None:
    return _turns.get(str(session_id))


def turn_stop(session_id, *, message_id: int | None = None) -> bool:
    """Stop the session's answer in this process (the asker pressed Stop): what streamed is kept,
    marked stopped. With `message_id`, only that answer. False when no such answer runs here."""
    turn = _turns.get(str(session_id))
    if turn is None or turn.task is None or turn.task.done():
        return False
    if message_id is not None and turn.message_id != message_id:
        return False
    turn.stopped = True
    turn.task.cancel()
    return True


async def wait_idle(timeout: float = 30.0) -> None:
    """Wait until no turn runs (tests, graceful shutdown)."""
    tasks = [t.task for t in list(_turns.values()) if t.task is not None]
    if tasks:
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout)


# ---- several processes (ragchat/processes.py) ---------------------------------------------------
# Client processes of the embedded store hand their sockets' turns to the holder on this channel
# of the Redis channel layer; the holder runs them like its own (frames go to the session's group).
HANDOFF_CHANNEL = "ragchat-chat-turns"
_serving: set[asyncio.Task] = set()  # strong references: the loop keeps weak ones


async def session_busy(session_id) -> bool:
    """An answer of the session is being written: here, or (several processes) by another process."""
    if active_turn(session_id) is not None:
        return True
    if not processes.several_processes():
        return False
    return await database_sync_to_async(selectors.answer_streaming_exists)(session_id=session_id)


def session_busy_sync(session_id) -> bool:
    """session_busy() for sync callers (the JSON API)."""
    if active_turn(session_id) is not None:
        return True
    return processes.several_processes() and selectors.answer_streaming_exists(session_id=session_id)


async def hand_over(*, session_id, user, user_message: Message, title: str = "") -> None:
    """Ask the holder to run this turn (a client process never opens the store)."""
    await get_channel_layer().send(
        HANDOFF_CHANNEL,
        {
            "type": "turn.start",
            "session_id": str(session_id),
            "user_id": user.pk,
            "message_id": user_message.pk,
            "title": title,
        },
    )


async def hand_over_stop(session_id, *, message_id: int | None) -> None:
    await get_channel_layer().send(
        HANDOFF_CHANNEL, {"type": "turn.stop", "session_id": str(session_id), "message_id": message_id}
    )


def _handed_turn_parts(user_id: int, message_id: int, session_id: str) -> tuple[Any, Message] | None:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    message = Message.objects.filter(pk=message_id, session_id=session_id, session__owner_id=user_id).first()
    if user is None or message is None:  # deleted meanwhile
        return None
    return user, message


async def _run_handed(event: dict) -> None:
    session_id = str(event["session_id"])
    if event.get("type") == "turn.stop":
        turn_stop(session_id, message_id=event.get("message_id"))
        return
    parts = await database_sync_to_async(_handed_turn_parts)(event["user_id"], event["message_id"], session_id)
    if parts is None:
        return
    user, message = parts
    try:
        await turn_start(session_id=session_id, user=user, user_message=message, title=event.get("title", ""))
    except TurnInProgress:  # two tabs on two processes asked at once: the first one is answered
        from chat.consumers import MSG_BUSY, note_html

        await group_send_html(session_id, note_html(MSG_BUSY, kind="info", transient=True))


async def serve_handed_turns() -> None:
    """The holder's loop: receive the turns client processes hand over and start each, forever."""
    layer = get_channel_layer()
    while True:
        try:
            event = await layer.receive(HANDOFF_CHANNEL)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # redis-py turns a cancel into a TimeoutError
                raise asyncio.CancelledError from e
            # Redis restarting, a read that timed out: nothing was taken, wait again.
            logger.debug("waiting for handed-over turns: %s", e)
            await asyncio.sleep(0.05)
            continue
        # Started side by side (a burst of questions does not queue behind each turn's first write);
        # turn_start reserves its session before its first await, so one session runs one turn.
        task = asyncio.create_task(_run_handed_logged(event), name="chat-handed-turn")
        _serving.add(task)
        task.add_done_callback(_serving.discard)


async def _run_handed_logged(event: dict) -> None:
    try:
        await _run_handed(event)
    except Exception:  # one bad hand-over must not end the loop
        logger.exception("handed-over chat turn failed to start", extra={"event": "chat_handover_failed"})


async def on_server_start(started_at) -> None:
    """At the server's first ASGI call: the one process that runs every chat turn (a single
    process, or the holder) closes the answers a dead process left streaming; the holder starts
    serving the turns client processes hand over."""
    if processes.store_role() == processes.HOLDER or not processes.several_processes():
        try:
            count = await database_sync_to_async(services.drafts_interrupt_stale)(started_before=started_at)
            if count:
                logger.warning("answers left streaming by a stopped process closed: %d", count)
        except Exception as e:  # never keeps the server from serving
            logger.error("closing stale answers failed: %s", e)
    if processes.holds_handed_turns() and getattr(settings, "RAGCHAT_SERVE_HANDED_TURNS", True):
        task = asyncio.get_running_loop().create_task(serve_handed_turns(), name="chat-handed-turns")
        _serving.add(task)
        task.add_done_callback(_serving.discard)


def on_first_call(application):
    """Wrap the ASGI application: `on_server_start()` runs once, on the first HTTP or websocket
    call (daphne has no lifespan events; the loop that serves exists from then on)."""
    from django.utils import timezone

    started_at = timezone.now()
    state = {"done": False}

    async def app(scope, receive, send):
        if not state["done"] and scope.get("type") in ("http", "websocket"):
            state["done"] = True  # set before awaiting: concurrent first calls do not run it twice
            await on_server_start(started_at)
        return await application(scope, receive, send)

    return app


async def group_send_html(session_id, html: str) -> None:
    await get_channel_layer().group_send(
        services.session_group_name(session_id), {"type": "chat.fragment", "html": html}
    )


def _draft_body(turn: Turn) -> str:
    """The draft's HTML, the same as presenters.streaming_body() gives, in time for what is new."""
    if turn.renderer is None or turn.renderer.prefix != turn.prefix:
        turn.renderer = DraftRenderer(prefix=turn.prefix)
    return turn.renderer.render(turn.text, known=turn.passages)


def draft_article_html(turn: Turn, *, oob: str = "true") -> str:
    """The whole draft as it stands (first frame, and a snapshot for a tab that connects late)."""
    return render_partial("chat/_draft.html", {"turn": turn, "body": _draft_body(turn), "oob": oob})


def _stage_html(turn: Turn) -> str:
    return render_partial("chat/_stage.html", {"turn": turn})


_BODY_SLOT = "\ue003"  # a private-use character: never in rendered Markdown, which nh3 passes through


def _body_html(turn: Turn) -> str:
    """A streamed frame: the draft's body in its oob wrapper. The wrapper is rendered once per turn
    and split around the body's slot: a template render per frame cost more than the frame's text."""
    if turn.body_shell is None:
        shell = render_partial("chat/_draft_body.html", {"prefix": turn.prefix, "body": _BODY_SLOT})
        head, tail = shell.split(_BODY_SLOT)
        turn.body_shell = (head, tail)
    head, tail = turn.body_shell
    return head + _draft_body(turn) + tail


class _PartialSaver:
    """The one writer of partial texts in this process: turns note their text as it grows; every
    SAVE_SECONDS one database call stores all that changed (one transaction). The final store of a
    turn forgets its entry first, and a late batch cannot overwrite it (the update only touches
    messages still streaming)."""

    def __init__(self) -> None:
        self.pending: dict[int, str] = {}
        self.task: asyncio.Task | None = None

    def note(self, message_id: int, text: str) -> None:
        self.pending[message_id] = text
        task = self.task
        # A task of an event loop that has ended (tests run several) never finishes: start anew.
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            self.task = asyncio.create_task(self._run(), name="chat-partial-saver")

    def forget(self, message_id: int) -> None:
        self.pending.pop(message_id, None)

    async def _run(self) -> None:
        while self.pending:
            await asyncio.sleep(SAVE_SECONDS)
            batch, self.pending = self.pending, {}
            if not batch:
                continue
            try:
                await database_sync_to_async(services.message_save_partials)(contents=batch)
            except Exception:  # a partial save is a convenience (the final store is what counts)
                logger.warning(
                    "saving partial answers failed", exc_info=True, extra={"event": "chat_partial_save_failed"}
                )


_saver = _PartialSaver()


class _Streamer:
    """Sends the draft to the group: now if the last frame is old enough, else on a timer. The
    spacing grows with the number of streams and with what this stream's last frame cost."""

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.lock = asyncio.Lock()
        self.last_flush = 0.0
        self.last_cost = 0.0
        self.sent_len = 0
        self.timer: asyncio.Task | None = None
        self.first_token_at: float | None = None

    def interval(self) -> float:
        busy = len(_turns) * (self.last_cost + FRAME_SEND_SECONDS) / FLUSH_LOOP_SHARE
        return min(FLUSH_MAX_SECONDS, max(FLUSH_SECONDS, busy))

    async def on_token(self) -> None:
        wait = self.interval() - (time.monotonic() - self.last_flush)
        if wait <= 0:
            await self.flush()
        elif self.timer is None:
            self.timer = asyncio.create_task(self._flush_later(wait))

    async def _flush_later(self, wait: float) -> None:
        await asyncio.sleep(wait)
        self.timer = None
        await self.flush()

    async def flush(self) -> None:
        async with self.lock:
            if len(self.turn.text) == self.sent_len:
                return
            self.sent_len = len(self.turn.text)
            self.last_flush = time.monotonic()
            rendering = time.perf_counter()
            html = _body_html(self.turn)
            self.last_cost = time.perf_counter() - rendering
            await group_send_html(self.turn.session_id, html)
            if self.first_token_at is None:
                self.first_token_at = time.perf_counter()
                self.turn.mark("first_token")
                _first_tokens.end(self.turn)
            _saver.note(self.turn.message_id, self.turn.text)

    async def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        _saver.forget(self.turn.message_id)

    async def drain(self) -> None:
        """Send what is buffered now (before a stage change, so frames stay in order)."""
        await self.close()
        await self.flush()


def _notify(turn: Turn, event: TurnEvent) -> None:
    for queue in turn.listeners:
        queue.put_nowait(event)


async def turn_start(
    *,
    session_id,
    user,
    user_message: Message,
    title: str = "",
    model: str | None = None,
    request_id: str | None = None,
    listener: asyncio.Queue | None = None,
) -> Turn:
    """Create the draft, show the question and the draft to every tab, start the turn's task.
    `listener` (the JSON API) also receives the turn's TurnEvents; `model` and `request_id` are
    the caller's (default: the configured model, a new id)."""
    turn = _reserve(session_id, question=user_message.content, model=model, request_id=request_id, listener=listener)
    prepared = await _begin(turn, _Ask(user=user, session_id=turn.session_id, message=user_message))
    assert prepared is not None, "a stored question is always prepared"
    await _launch(turn, user=user, prepared=prepared, title=title)
    return turn


async def turn_ask(
    *, session_id, user, question: str, accepted: Callable[[], Awaitable[None]] | None = None
) -> Turn | None:
    """A new question from a tab: stored, its draft created and what the core needs read in one trip
    to the database thread, shared with the questions that arrive with it (_Preparer); then
    `accepted()` (the asking tab's composer may clear), the question and the draft to every tab, and
    the turn's task. None when the session is gone (deleted meanwhile)."""
    turn = _reserve(session_id, question=question)
    _embed_ahead(question)
    prepared = await _begin(turn, _Ask(user=user, session_id=turn.session_id, question=question))
    if prepared is None:
        return None
    if accepted is not None:
        try:
            await accepted()
        except asyncio.CancelledError:
            _release(turn)
            raise
        except Exception as e:  # the asking tab went away: its question is stored, the answer still comes
            logger.info("the asking tab was not told its question was accepted: %s", e)
    await _launch(turn, user=user, prepared=prepared, title=prepared.title)
    return turn


_ahead: set[asyncio.Task] = set()  # strong references: the loop keeps weak ones


def _embed_ahead(question: str) -> None:
    """The question's search text embedded while the turn is prepared (RAGService.embed_ahead): the
    embedding model runs in a process of its own, so in a burst the two overlap instead of one
    waiting for the other."""

    async def run() -> None:
        try:
            await runtime.rag_service().embed_ahead(question)
        except Exception as e:  # the search embeds it again, and says what failed
            logger.debug("embedding a question ahead failed: %s", e)

    task = asyncio.get_running_loop().create_task(run())
    _ahead.add(task)
    task.add_done_callback(_ahead.discard)


@dataclass(frozen=True)
class _Ask:
    """What a turn needs prepared: a new question to store (`question`), or a stored one to answer
    again (`message`: a retry, a regenerate, an edit, a chat begun from the landing page, the API)."""

    user: Any
    session_id: str
    question: str = ""
    message: Message | None = None


@dataclass(frozen=True)
class _Prepared:
    question: Message
    draft: Message
    user_html: str
    inputs: TurnInputs
    title: str = ""


def _reserve(session_id, *, question: str, model=None, request_id=None, listener=None) -> Turn:
    """The session's one slot, taken before the first await: a second question cannot slip in."""
    key = str(session_id)
    if key in _turns:
        raise TurnInProgress(key)
    turn = Turn(session_id=key, message_id=0, question=question, model=model, request_id=request_id)
    if listener is not None:
        turn.listeners.append(listener)
    _turns[key] = turn
    _first_tokens.begin(turn)
    return turn


def _release(turn: Turn) -> None:
    _turns.pop(turn.session_id, None)
    _first_tokens.end(turn)


async def _begin(turn: Turn, ask: _Ask) -> _Prepared | None:
    try:
        prepared = await _preparer.submit(ask)
    except BaseException:
        _release(turn)
        raise
    if prepared is None:
        _release(turn)
        return None
    turn.message_id = prepared.draft.pk
    turn.question = prepared.question.content
    turn.inputs = prepared.inputs
    turn.mark("prepared")
    return prepared


async def _launch(turn: Turn, *, user, prepared: _Prepared, title: str) -> None:
    try:
        frame = render_partial(
            "chat/_turn_start.html",
            {
                "user_html": prepared.user_html,
                "turn": turn,
                "body": _draft_body(turn),
                "title": title,
                "session_id": turn.session_id,
            },
        )
        await group_send_html(turn.session_id, frame)
        turn.mark("shown")
    except BaseException:
        _release(turn)
        raise
    turn.task = asyncio.create_task(
        _run(turn, user=user, user_message=prepared.question), name=f"chat-turn-{turn.session_id}"
    )


def question_store(*, user, session_id, question: str) -> tuple[ChatSession, Message] | None:
    """The asker's session (None once deleted) and their stored question (a client process stores
    the question, then hands the turn to the holder)."""
    session = selectors.session_for_user(user=user, session_id=session_id)
    if session is None:
        return None
    return session, services.message_create_user(session=session, content=question)


async def _prepare_asks(asks: list[_Ask]) -> list[_Prepared | None | Exception]:
    return await database_sync_to_async(_prepare_batch)(asks)


# Questions that arrive together are prepared in one trip to the database thread.
#
# Before its search a turn needs its question stored, its draft created and the question's HTML,
# the asker's tags and glossary and the conversation so far: nine statements one by one. In a burst
# every trip to the process's one database thread waits behind all the others', and every statement
# gives Python's GIL away and waits to get it back from the busy event loop (a burst of 200
# questions spent 15 ms a question there against 3.5 ms alone). An ask that finds the preparer idle
# goes at once; asks that arrive while a batch runs go together into the next one (at most
# PREPARE_BATCH), stored with a few statements for all of them.
_preparer: Batcher[_Ask, _Prepared | None] = Batcher(_prepare_asks, max_batch=PREPARE_BATCH)


def _prepare_batch(asks: list[_Ask]) -> list[_Prepared | None | Exception]:
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


def _store_asks(asks: list[_Ask]) -> list[_Stored | None]:
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


def _with_inputs(ready: list[tuple[_Ask, _Stored]]) -> list[_Prepared]:
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
            _Prepared(
                question=item.question,
                draft=item.draft,
                user_html=presenters.message_html(item.question, oob=True),
                inputs=TurnInputs(tags=tags, glossary=glossary, history=history),
                title=item.title,
            )
        )
    return prepared


async def _run(turn: Turn, *, user, user_message: Message) -> None:
    try:
        await _answer(turn, user=user, user_message=user_message)
    except Exception:  # the task's last resort: never leave a draft streaming forever
        logger.exception("chat turn crashed", extra={"event": "chat_turn_crashed", "session_id": turn.session_id})
    finally:
        _release(turn)
        _notify(turn, TurnEvent("closed"))


async def _answer(turn: Turn, *, user, user_message: Message) -> None:
    rag = runtime.rag_service()
    inputs = turn.inputs
    assert inputs is not None, "read by _prepare before the task starts"
    tags, glossary, history = inputs.tags, inputs.glossary, inputs.history
    retrieval_query, strategy = build_retrieval_query(query=turn.question, history=history)
    request = RAGRequest(
        query=turn.question,
        user_tags=tags,
        tenant_id=user.tenant_id,
        chat_history=history,
        retrieval_query=retrieval_query,
        query_strategy=strategy,
        request_id=turn.request_id or uuid.uuid4().hex,
        model=turn.model,
        glossary=tuple(glossary),
    )
    streamer = _Streamer(turn)
    final: RAGResponse | None = None
    try:
        await runtime.ready_vector_service()
        async for event in rag.stream(request):
            if isinstance(event, TokenEvent):
                if not turn.text:
                    turn.mark("token")
                turn.text += event.text
                _notify(turn, TurnEvent("token", text=event.text))
                await streamer.on_token()
                await _first_tokens.give_way(turn)
            elif isinstance(event, ContextEvent):
                turn.mark("context")
                turn.passages = presenters.passages_from_results(event.results)
            elif isinstance(event, StageEvent):
                turn.mark(event.stage)
                await streamer.drain()
                shown = turn.stage == event.stage  # the draft starts out "searching": no frame to say it again
                turn.stage = event.stage
                _notify(turn, TurnEvent("stage", text=event.stage))
                if not shown:
                    await group_send_html(turn.session_id, _stage_html(turn))
            elif isinstance(event, FinalEvent):
                final = event.response
    except Exception as e:  # RAGServiceError and anything unexpected: the turn ends as failed, never hangs
        await streamer.close()
        await _fail(turn, request=request, rag=rag, error=e)
        return
    except asyncio.CancelledError:
        await streamer.close()
        if turn.stopped:
            # The asker pressed Stop: keep what streamed, marked stopped; the task ends normally.
            await asyncio.shield(_fail(turn, request=request, rag=rag, error=None))
            return
        # The process is shutting down: keep what streamed, marked interrupted.
        await asyncio.shield(_fail(turn, request=request, rag=rag, error=LLMConnectionError("turn cancelled")))
        raise
    await streamer.close()
    assert final is not None, "RAGService.stream() ends with a FinalEvent or raises"
    try:
        await _first_tokens.give_way(turn)  # stored, and routed, once waiting questions have their first token
    except asyncio.CancelledError:
        # Stopped, or the process is stopping, while it waited to be stored: the answer is whole.
        await asyncio.shield(_complete(turn, final))
        if turn.stopped:
            return
        raise
    await _complete(turn, final)


def _write_timeline(turn: Turn) -> None:
    """One JSON line per turn (its steps' wall times) to settings.RAGCHAT_TURN_TIMELINE, if set:
    `manage.py bench` reads where a burst's time goes from it."""
    path = getattr(settings, "RAGCHAT_TURN_TIMELINE", "")
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as out:
            record = {
                "session_id": turn.session_id,
                "message_id": turn.message_id,
                **turn.marks,
                "core": turn.core_timings,
            }
            out.write(json.dumps(record) + "\n")
    except OSError as e:
        logger.warning("turn timeline not written: %s", e)


def _final_fields(response: RAGResponse) -> dict[str, Any]:
    confidence = response.confidence
    return {
        "content": response.answer,
        "status": Message.Status.COMPLETE,
        "citations": [presenters.citation_to_dict(c) for c in response.citations],
        "passages": presenters.passages_from_results(response.context),
        "confidence": {
            "overall": confidence.overall,
            "retrieval": confidence.retrieval_score,
            "coverage": confidence.coverage_score,
            "llm": confidence.llm_score,
        },
        "action": response.action,
        "route_target": asdict(response.route_to) if response.route_to else None,
        "model": response.model_used,
        "query_strategy": response.query_strategy,
        "retrieval_query": response.retrieval_query,
        "grounding": response.grounding.as_dict() if response.grounding is not None else {},
        "timings": {**response.timings, "total": round(response.generation_time_ms, 1)},
        "request_id": response.request_id or "",
    }


async def _complete(turn: Turn, response: RAGResponse) -> None:
    turn.core_timings = dict(response.timings)
    await _publish_final(turn, *await database_sync_to_async(_store)(turn.message_id, _final_fields(response)))


async def _fail(turn: Turn, *, request: RAGRequest, rag: Any, error: BaseException | None) -> None:
    """Keep the question and whatever streamed, say what happened, show the passages found.
    `error` None: the asker stopped the answer."""
    if error is None:
        logger.info("chat turn stopped by its asker", extra={"event": "chat_turn_stopped"})
    elif not isinstance(error, RAGServiceError):
        logger.exception("chat turn failed unexpectedly", exc_info=error, extra={"event": "chat_turn_error"})
    else:
        logger.warning(
            "chat turn failed: %s", error, extra={"event": "chat_turn_failed", "error_type": type(error).__name__}
        )
    # The core yields the passages (ContextEvent) before raising an LLM error, also when Ollama
    # is down at the model check, so whatever was retrieved is already on the turn.
    fields = {
        "content": turn.text,
        "status": Message.Status.INTERRUPTED if turn.text.strip() else Message.Status.FAILED,
        "passages": turn.passages,
        "error": MSG_STOPPED if error is None else error_sentence(error),
        "error_type": presenters.STOPPED if error is None else type(error).__name__,
        "model": request.model or getattr(rag, "default_model", ""),
        "query_strategy": request.query_strategy,
        "retrieval_query": request.retrieval_query or "",
        "timings": {"total": round((time.perf_counter() - turn.started) * 1000, 1)},
        "request_id": request.request_id or "",
    }
    await _publish_final(turn, *await database_sync_to_async(_store)(turn.message_id, fields))


def _store(message_id: int, fields: dict[str, Any]) -> tuple[Message, str]:
    """Store the end of the turn and render it, in one trip to the database thread."""
    message = services.message_finish(message=Message.objects.get(pk=message_id), fields=fields)
    return message, presenters.message_html(message, oob=True)


async def _publish_final(turn: Turn, message: Message, html: str) -> None:
    await group_send_html(turn.session_id, html)
    turn.mark("final")
    _write_timeline(turn)
    await database_sync_to_async(_signal_completed)(message)
    _notify(turn, TurnEvent("final", message=message))


def _signal_completed(message: Message) -> None:
    for receiver, result in answer_completed.send_robust(sender=Message, message=message):
        if isinstance(result, Exception):
            logger.error(
                "answer_completed receiver %r failed: %s", receiver, result, extra={"event": "chat_signal_failed"}
            )
