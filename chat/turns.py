"""One chat turn, run as a task owned by the process, not by a websocket consumer.

Daphne cancels a consumer about 10 s after its socket closes, so a turn started from a consumer
lives in the process's registry (chat.turn_state) instead: it streams the RAG core's events to the
session's channel group (every open tab sees them; a closed tab loses nothing; chat.turn_stream
paces the frames and saves the partial text), and stores the final (or interrupted / failed)
assistant message at the end.

The turn's other parts: chat.turn_prepare (what it needs before its search, for the questions that
arrive together), chat.turn_fragments (its HTML), chat.turn_handover (several processes).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from chat import presenters, selectors, services
from chat.models import Message
from chat.signals import answer_completed
from chat.turn_fragments import group_send_html, stage_html, turn_start_html
from chat.turn_prepare import Ask, Prepared, preparer
from chat.turn_state import Turn, TurnEvent, turn_register, turn_unregister, turns_running
from chat.turn_stream import Streamer, first_tokens
from ragchat import runtime
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
    if isinstance(error, CollectionMismatchError):  # not passing: until re-indexed (docs/deploying.md "Upgrading")
        return MSG_REINDEX
    if isinstance(error, ContextError):
        return MSG_SEARCH
    return MSG_UNKNOWN


async def wait_idle(timeout: float = 30.0) -> None:
    """Wait until no turn runs (tests, graceful shutdown)."""
    tasks = [t.task for t in turns_running() if t.task is not None]
    if tasks:
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout)


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
    the caller's (default: the configured model, a new id). The question's search text is embedded
    while the draft is prepared, as for a new question (turn_ask)."""
    turn = _reserve(session_id, question=user_message.content, model=model, request_id=request_id, listener=listener)
    _embed_ahead(user_message.content)
    prepared = await _begin(turn, Ask(user=user, session_id=turn.session_id, message=user_message))
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
    prepared = await _begin(turn, Ask(user=user, session_id=turn.session_id, question=question))
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


def _reserve(session_id, *, question: str, model=None, request_id=None, listener=None) -> Turn:
    """The session's one slot, taken before the first await: a second question cannot slip in."""
    turn = Turn(session_id=str(session_id), message_id=0, question=question, model=model, request_id=request_id)
    if listener is not None:
        turn.listeners.append(listener)
    turn_register(turn)
    first_tokens.begin(turn)
    return turn


def _release(turn: Turn) -> None:
    turn_unregister(turn)
    first_tokens.end(turn)


async def _begin(turn: Turn, ask: Ask) -> Prepared | None:
    try:
        prepared = await preparer.submit(ask)
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


async def _launch(turn: Turn, *, user, prepared: Prepared, title: str) -> None:
    try:
        frame = turn_start_html(turn, user_html=prepared.user_html, title=title)
        await group_send_html(turn.session_id, frame)
        turn.mark("shown")
    except BaseException:
        _release(turn)
        raise
    turn.task = asyncio.create_task(
        _run(turn, user=user, user_message=prepared.question), name=f"chat-turn-{turn.session_id}"
    )


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
    assert inputs is not None, "set by _begin before the task starts"
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
    streamer = Streamer(turn)
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
                await first_tokens.give_way(turn)
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
                    await group_send_html(turn.session_id, stage_html(turn))
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
        await first_tokens.give_way(turn)  # stored, and routed, once waiting questions have their first token
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
    """Store the end of the turn and render it, in one trip to the database thread. Nobody has voted
    on the answer yet: that needs it finished, which it is from this write on (and whoever votes
    sends the message again). Nor sent it to a person, unless it regenerates an answer whose
    question was: the question's route shows on every version."""
    message = services.message_finish(message=Message.objects.get(pk=message_id), fields=fields)
    versions = selectors.answer_versions_of(message)
    routed = True if versions else None
    return message, presenters.message_html(message, oob=True, versions=versions, routed=routed, feedback=None)


async def _publish_final(turn: Turn, message: Message, html: str) -> None:
    turn.final_html = html  # before the frame: a tab joining the group after it reads this
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
