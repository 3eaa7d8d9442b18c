"""Several processes (ragchat/processes.py): client processes of the embedded store hand their
sockets' turns to the holder, which runs them like its own (frames go to the session's group, so
they reach every tab, whichever process holds its socket).

Also what runs once at the server's first call: answers a dead process left streaming are closed,
and the holder starts serving the turns handed over.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from chat import selectors, services
from chat.models import ChatSession, Message
from chat.turn_fragments import MSG_BUSY, group_send_html, note_html
from chat.turn_state import TurnInProgress, active_turn, turn_stop
from chat.turns import turn_start
from ragchat import processes

logger = logging.getLogger(__name__)

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


def question_store(*, user, session_id, question: str) -> tuple[ChatSession, Message] | None:
    """The asker's session (None once deleted) and their stored question (a client process stores
    the question, then hands the turn to the holder)."""
    session = selectors.session_for_user(user=user, session_id=session_id)
    if session is None:
        return None
    return session, services.message_create_user(session=session, content=question)
