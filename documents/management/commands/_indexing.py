"""Shared by the indexing commands: open the vector store or explain why it cannot be opened."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.core.management.base import CommandError

from ragchat import runtime
from ragchat.services.errors import VectorStoreError

logger = logging.getLogger(__name__)

T = TypeVar("T")


def on_one_event_loop(work: Callable[[], T]) -> T:
    """Run a command's `work` so that its async steps (every file's ingestion is an async_to_sync
    call) share one event loop: on its own each async_to_sync runs on a fresh loop, closed after,
    and a client the first file opened (the Ollama embedder's httpx pool) then fails the next file
    with "Event loop is closed". `work` runs in this thread (thread-sensitive: Django's connection
    stays the caller's); async_to_sync inside it goes to the loop this call runs."""
    return async_to_sync(sync_to_async(work, thread_sensitive=True))()


def open_vector_store() -> None:
    async def ready():
        runtime.embedder()
        await runtime.ready_vector_service()

    try:
        async_to_sync(ready)()
    except VectorStoreError as e:
        if settings.RAG.qdrant_url:
            raise CommandError(f"Cannot reach Qdrant at {settings.RAG.qdrant_url}: {e}") from e
        raise CommandError(
            f"The embedded vector store at {settings.RAG.qdrant_path} cannot be opened ({e}). "
            "It can be opened by one process at a time: if the server is running, stop it and run this command "
            "first (`make run` does so), or upload through the web page instead."
        ) from e


def settle_vector_store() -> float:
    """Let the store finish what it builds lazily (segments, 8-bit vectors, graphs: the fast
    filtered search); the seconds it took. The embedded store can do this only in a process that
    serves nobody (EdgeBackend.settle), so the indexing commands do it as they finish."""

    async def settle() -> float:
        started = time.perf_counter()
        await (await runtime.ready_vector_service()).settle()
        return time.perf_counter() - started

    return async_to_sync(settle)()


def close_vector_store(*, settle: bool = True) -> None:
    try:
        if settle:
            settle_vector_store()
    except Exception as e:  # searches stay right, only slower; the command's own outcome stands
        logger.warning(
            "the vector store could not settle: %s; run `manage.py settle_index`", e, extra={"event": "settle_failed"}
        )
    finally:
        runtime.reset()  # flushes and releases the embedded store for the server that starts next
