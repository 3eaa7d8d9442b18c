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
import logging
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from chat import presenters, selectors, services
from chat.models import Message
from chat.rendering import DraftRenderer
from chat.signals import answer_completed
from ragchat import processes, runtime
from ragchat.partials import render_partial
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

    @property
    def prefix(self) -> str:
        return f"m{self.message_id}"


_turns: dict[str, Turn] = {}


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
    key = str(session_id)
    if key in _turns:
        raise TurnInProgress(key)
    # Reserve the slot before the first await: a second question cannot slip in meanwhile.
    turn = Turn(session_id=key, message_id=0, question=user_message.content, model=model, request_id=request_id)
    if listener is not None:
        turn.listeners.append(listener)
    _turns[key] = turn
    try:
        draft, user_html = await database_sync_to_async(_create_draft)(session_id, user_message)
        turn.message_id = draft.pk
        frame = render_partial(
            "chat/_turn_start.html",
            {"user_html": user_html, "turn": turn, "body": _draft_body(turn), "title": title, "session_id": session_id},
        )
        await group_send_html(session_id, frame)
    except BaseException:
        _turns.pop(key, None)
        raise
    turn.task = asyncio.create_task(_run(turn, user=user, user_message=user_message), name=f"chat-turn-{key}")
    return turn


def _create_draft(session_id, user_message: Message) -> tuple[Message, str]:
    """The answer's draft, and the question's HTML as an upsert: appended when new, replaced in place
    when the page shows it already (a retry, a chat begun from the landing page). One trip to the
    database thread: in a burst every trip waits behind every other question's."""
    draft = services.message_create_draft(session_id=session_id, reply_to=user_message)
    return draft, presenters.message_html(user_message, oob=True)


def _turn_inputs(user, session_id: str, user_message: Message) -> tuple[list[str], list[Any], list[Any]]:
    """What the core is told about the asker and the conversation, read in one trip: the tags they
    may read, their glossary, the history before the question."""
    from access.policy import readable_tag_slugs
    from documents.selectors import glossary_entries_for

    return (
        readable_tag_slugs(user=user),
        glossary_entries_for(user=user),
        selectors.session_history(session_id=session_id, before=user_message),
    )


async def _run(turn: Turn, *, user, user_message: Message) -> None:
    try:
        await _answer(turn, user=user, user_message=user_message)
    except Exception:  # the task's last resort: never leave a draft streaming forever
        logger.exception("chat turn crashed", extra={"event": "chat_turn_crashed", "session_id": turn.session_id})
    finally:
        _turns.pop(turn.session_id, None)
        _notify(turn, TurnEvent("closed"))


async def _answer(turn: Turn, *, user, user_message: Message) -> None:
    rag = runtime.rag_service()
    tags, glossary, history = await database_sync_to_async(_turn_inputs)(user, turn.session_id, user_message)
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
                turn.text += event.text
                _notify(turn, TurnEvent("token", text=event.text))
                await streamer.on_token()
            elif isinstance(event, ContextEvent):
                turn.passages = presenters.passages_from_results(event.results)
            elif isinstance(event, StageEvent):
                await streamer.drain()
                turn.stage = event.stage
                _notify(turn, TurnEvent("stage", text=event.stage))
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
    await _complete(turn, final)


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
    await database_sync_to_async(_signal_completed)(message)
    _notify(turn, TurnEvent("final", message=message))


def _signal_completed(message: Message) -> None:
    for receiver, result in answer_completed.send_robust(sender=Message, message=message):
        if isinstance(result, Exception):
            logger.error(
                "answer_completed receiver %r failed: %s", receiver, result, extra={"event": "chat_signal_failed"}
            )
