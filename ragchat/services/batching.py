"""Calls that arrive together share one run: the pattern behind a burst of questions.

A burst of questions asks the same costly thing of the process many times at once: embed a query
(one model call each, or a batch for all), prepare a turn (a trip to the one database thread each,
or one for all). `Batcher` gives every caller its own result from runs over many callers. No
collection window is waited for: a call that finds the batcher idle runs at once (one question
pays nothing); calls that arrive while a run is under way go together into the next one (at most
`max_batch`). Runs are per event loop, so no future crosses loops; a caller that gives up (a closed
tab) drops only its own result, and is left out of the runs that have not started.
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

In = TypeVar("In")
Out = TypeVar("Out")


class Batcher(Generic[In, Out]):
    """`await batcher.submit(item)`: the result for `item` of `run(items)`, which is called with the
    items that arrived together and returns one result per item, in order. A result that is an
    exception fails only its caller; an exception raised by `run` fails every caller of that run,
    and the next run is tried as usual."""

    def __init__(self, run: Callable[[list[In]], Awaitable[Sequence[Out | BaseException]]], *, max_batch: int) -> None:
        self.run = run
        self.max_batch = max(1, max_batch)
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queue[In, Out]] = (
            weakref.WeakKeyDictionary()
        )
        self.runs = 0  # runs made, and the items they took
        self.items = 0

    async def submit(self, item: In) -> Out:
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = _Queue[In, Out]()
        future: asyncio.Future[Out] = loop.create_future()
        queue.waiting.append((item, future))
        if queue.worker is None or queue.worker.done():
            # A context of its own: the worker serves every caller, never one request's context
            # (a sync view's thread-sensitive executor, say).
            queue.worker = loop.create_task(self._drain(queue), context=contextvars.Context())
        return await future

    async def _drain(self, queue: _Queue[In, Out]) -> None:
        while queue.waiting:
            batch = [(item, future) for item, future in queue.waiting[: self.max_batch] if not future.done()]
            del queue.waiting[: self.max_batch]
            if not batch:
                continue
            try:
                results = list(await self.run([item for item, _ in batch]))
            except Exception as e:
                results = [e] * len(batch)
            else:
                self.runs += 1
                self.items += len(batch)
            for (_, future), result in zip(batch, results, strict=True):
                if future.done():
                    continue
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)


class _Queue(Generic[In, Out]):
    def __init__(self) -> None:
        self.waiting: list[tuple[In, asyncio.Future[Out]]] = []
        self.worker: asyncio.Task[None] | None = None
