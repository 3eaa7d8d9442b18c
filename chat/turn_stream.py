"""A turn's answer streamed to its session's tabs, paced by load, and the process's batched writes.

Tokens are coalesced: the first one goes out at once (time-to-first-token), later ones in frames
each carrying the whole draft rendered as the final answer will be (chat.turn_fragments). Per token
nothing touches the database or the channel layer:
- the draft is rendered incrementally (chat.rendering.DraftRenderer: settled blocks once, then only
  the open tail), so a frame costs what is new, not the whole answer again;
- frames are paced by load (Streamer): at least FLUSH_SECONDS apart, and spaced so that all streams'
  frames together take at most FLUSH_LOOP_SHARE of the event loop (50 ms with a few streams, longer
  with hundreds; never more than FLUSH_MAX_SECONDS);
- partial texts are saved by one process-wide writer (_PartialSaver): every SAVE_SECONDS, one
  database call (one transaction) stores every draft that grew, however many streams run;
- first tokens first (FirstTokens): answers that already show text give way while questions of the
  process wait for their first token.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from dataclasses import dataclass, field

from channels.db import database_sync_to_async

from chat import services
from chat.turn_fragments import body_html, group_send_html
from chat.turn_state import Turn, turns_count

logger = logging.getLogger(__name__)

FLUSH_SECONDS = 0.05
FLUSH_MAX_SECONDS = 1.0
FLUSH_LOOP_SHARE = 0.3
# Sending a frame (channel layer, a tab's consumer, websocket write), on top of its measured render
# time: about 0.4 ms measured with 200 streams (py-spy, in-memory layer).
FRAME_SEND_SECONDS = 0.0004
SAVE_SECONDS = 0.5  # one batched write for all streams: cheap enough to keep the drafts fresh
# Longest pause of an answer that gives way to questions waiting for their first token (FirstTokens):
# a burst of 200 questions gets its first tokens out in about that time.
GIVE_WAY_MAX_SECONDS = 3.0


class FirstTokens:
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


first_tokens = FirstTokens()


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


class Streamer:
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
        busy = turns_count() * (self.last_cost + FRAME_SEND_SECONDS) / FLUSH_LOOP_SHARE
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
            html = body_html(self.turn)
            self.last_cost = time.perf_counter() - rendering
            await group_send_html(self.turn.session_id, html)
            if self.first_token_at is None:
                self.first_token_at = time.perf_counter()
                self.turn.mark("first_token")
                first_tokens.end(self.turn)
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
