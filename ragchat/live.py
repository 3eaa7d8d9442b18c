"""Live pushes (channel-layer sends) from sync code: services called by views, signal receivers,
anything that runs on the database thread.

Sync code that the server's event loop runs in a worker thread (`database_sync_to_async`, a sync
view under daphne) used `async_to_sync` for each push: the thread then waits until the busy loop
gets round to the send. That thread is the process's one database thread, so in a burst every
question's database work waited behind those round trips (a routed answer made three). Here the
send is handed to the loop and the thread goes on; outside a running server (a management command,
a worker process, a test's sync client) there is no loop to hand it to, and the send runs to its end
before the call returns, as before.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync

logger = logging.getLogger(__name__)


def _server_loop() -> asyncio.AbstractEventLoop | None:
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
    loop = _server_loop()
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


def group_send(group: str, event: dict) -> None:
    """`event` to every member of the channel group `group` (see `send_soon`)."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is None:
        return
    send_soon(layer.group_send, group, event)
