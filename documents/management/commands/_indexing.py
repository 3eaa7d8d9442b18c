"""Shared by the indexing commands: open the vector store or explain why it cannot be opened."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.management.base import CommandError

from ragchat import runtime
from ragchat.services.errors import VectorStoreError


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


def close_vector_store() -> None:
    runtime.reset()  # flushes and releases the embedded store for the server that starts next
