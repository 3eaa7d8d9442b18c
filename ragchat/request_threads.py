"""HTTP requests run their synchronous part (middleware, view, database) on a few long-lived threads.

Django's ASGI handler gives every request a thread of its own (asgiref's ThreadSensitiveContext):
200 people opening a new chat at once are 400 threads (the question's POST, then the chat's page),
each wanting Python's GIL for every statement it runs. The event loop, which streams every answer
and starts every new chat's turn, and the database thread of the websockets (channels) then get a
four-hundredth of the process each: the chats whose sockets opened first waited seconds for their
first token, and sockets waited past daphne's 5 s handshake limit and were refused.

Here each request's synchronous work goes to one of REQUEST_THREADS threads instead, the least
busy one (ThreadSensitiveContext with that thread's executor): requests beyond that wait their turn
in a queue, holding no thread and no GIL. Awaiting is not holding: an async view that waits for an
answer (the JSON API) occupies no thread meanwhile. A thread keeps its database connection from one
request to the next (CONN_MAX_AGE), as a WSGI worker does, instead of one connection per request.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import ThreadSensitiveContext

DEFAULT_THREADS = 4


@dataclass
class _Lane:
    executor: ThreadPoolExecutor
    requests: int = 0  # in this lane now: running or waiting for its thread


@dataclass
class RequestThreads:
    """ASGI middleware for the HTTP app: its requests' synchronous work on `threads` threads."""

    app: Any
    threads: int = DEFAULT_THREADS
    _lanes: list[_Lane] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lanes = [
            _Lane(ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"http-{i}"))
            for i in range(max(1, self.threads))
        ]

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        lane = min(self._lanes, key=lambda lane: lane.requests)
        lane.requests += 1
        try:
            async with ThreadSensitiveContext(executor=lane.executor):
                await self.app(scope, receive, send)
        finally:
            lane.requests -= 1


def request_threads(app: Any) -> Any:
    """`app` with its requests on RAGCHAT_REQUEST_THREADS threads (default DEFAULT_THREADS; 0: a
    thread per request, as Django does)."""
    threads = int(os.environ.get("RAGCHAT_REQUEST_THREADS", DEFAULT_THREADS))
    return RequestThreads(app, threads=threads) if threads > 0 else app
