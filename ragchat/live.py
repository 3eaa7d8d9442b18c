"""Live pushes (channel-layer sends) from sync code: services called by views, signal receivers,
anything that runs on the database thread.

Sync code that the server's event loop runs in a worker thread (`database_sync_to_async`, a sync
view under daphne) used `async_to_sync` for each push: the thread then waits until the busy loop
gets round to the send. That thread is the process's one database thread, so in a burst every
question's database work waited behind those round trips (a routed answer made three). Here the
send is handed to the loop and the thread goes on; outside a running server (a management command,
a worker process, a test's sync client) there is no loop to hand it to, and the send runs to its end
before the call returns, as before.

Pushes to one group keep the order they were made in: each is its own task on the loop, and over
Redis a send takes several awaits, so a later push could overtake an earlier one (a tab shown a
stale re-render after the newer one). `group_send` queues them per group and loop, one send at a time.
"""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync

logger = logging.getLogger(__name__)


def server_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop that runs this thread's sync code (set by asgiref in its worker threads)."""
    local = SyncToAsync.threadlocal
    loop = getattr(local, "main_event_loop", None)
    if loop is None or getattr(local, "main_event_loop_pid", None) != os.getpid():
        return None
    if loop.is_closed() or not loop.is_running():
        return None
    return loop


def send_soon(send: Callable[..., Awaitable[Any]], /, *args: Any, **kwargs: Any) -> None:
    """Run `send(*args, **kwargs)` (a coroutine function) on the server's loop without waiting for it;
    with no running server loop, run it now. A failed push is logged: the page shows the change on
    its next load."""
    loop = server_loop()
    if loop is None:
        try:
            async_to_sync(send)(*args, **kwargs)
        except Exception as e:
            logger.warning("live push failed: %s", e, extra={"event": "live_push_failed"})
        return
    future = asyncio.run_coroutine_threadsafe(send(*args, **kwargs), loop)
    future.add_done_callback(_log_failure)


def _log_failure(future: Future) -> None:
    if future.cancelled():
        return
    error = future.exception()
    if error is not None:
        logger.warning("live push failed: %s", error, extra={"event": "live_push_failed"})


# Per loop, the groups with a send in flight and the events waiting behind it (loop thread only).
_WAITING: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, deque[dict]]] = weakref.WeakKeyDictionary()


async def _send_in_order(layer: Any, group: str, event: dict) -> None:
    """Send `event` to `group` after every earlier push to it from this loop. The first push to an
    idle group sends now and then sends what queued behind it; the others only queue (their own
    step up to here runs in the order they were handed to the loop)."""
    waiting = _WAITING.setdefault(asyncio.get_running_loop(), {})
    queue = waiting.get(group)
    if queue is not None:
        queue.append(event)
        return
    queue = waiting[group] = deque([event])
    try:
        while queue:
            try:
                await layer.group_send(group, queue[0])
            except Exception as e:
                logger.warning("live push failed: %s", e, extra={"event": "live_push_failed"})
            queue.popleft()
    finally:
        del waiting[group]


def group_send(group: str, event: dict) -> None:
    """`event` to every member of the channel group `group`, after the earlier pushes to it (see
    `send_soon`)."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is None:
        return
    send_soon(_send_in_order, layer, group, event)
