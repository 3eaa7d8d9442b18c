"""The process's RAG parts, built once from settings.RAG and shared by views, consumers and tasks.

In embedded mode the on-disk Qdrant may be opened by one process only, so every vector-store
access goes through this module inside the server process.
"""
from __future__ import annotations

import asyncio
import threading

from django.conf import settings

from ragchat.services.config import RAGSettings

_lock = threading.RLock()  # re-entrant: building one part builds the parts it needs (vector service → embedder)
_parts: dict[str, object] = {}
_init_lock: asyncio.Lock | None = None
_initialized = False


def rag_settings() -> RAGSettings:
    return settings.RAG


def _get(name: str, build):
    part = _parts.get(name)
    if part is None:
        with _lock:
            part = _parts.get(name)
            if part is None:
                part = build()
                _parts[name] = part
    return part


def embedder():
    from ragchat.services.embeddings import build_embedder

    return _get("embedder", lambda: build_embedder(rag_settings()))


def vector_service():
    """The VectorService (not yet initialised; use `await ready_vector_service()` on async paths)."""
    from ragchat.services.vector_store import VectorService

    return _get("vector_service", lambda: VectorService.from_settings(rag_settings(), embedder()))


async def ready_vector_service():
    global _init_lock, _initialized
    service = vector_service()
    if not _initialized:
        if _init_lock is None:
            _init_lock = asyncio.Lock()
        async with _init_lock:
            if not _initialized:
                await service.initialize()
                _initialized = True
    return service


def llm():
    from ragchat.services.llm import OllamaLLM

    return _get("llm", lambda: OllamaLLM(rag_settings()))


def reranker():
    """The cross-encoder of RAG_RERANKER, or None (no rerank stage)."""
    from ragchat.services.reranking import build_reranker

    if "reranker" not in _parts:
        with _lock:
            if "reranker" not in _parts:
                _parts["reranker"] = build_reranker(rag_settings())
    return _parts["reranker"]


def rag_service():
    from ragchat.services.rag_service import RAGService

    def build():
        from documents.selectors import tag_owner_lookup

        return RAGService(
            vector_service(), rag_settings(), llm=llm(), owner_lookup=tag_owner_lookup, reranker=reranker()
        )

    return _get("rag_service", build)


def reset() -> None:
    """Forget every part (tests, or after settings change). Closes what holds files or sockets."""
    global _initialized, _init_lock
    with _lock:
        parts = dict(_parts)
        _parts.clear()
        _initialized = False
        _init_lock = None
    service = parts.get("vector_service")
    if service is not None and hasattr(service, "close_sync"):
        service.close_sync()


def warm_up_in_background() -> threading.Thread:
    """Load the embedding model and open the vector store off the request path, so the first
    question after start-up does not wait seconds for torch and the model to load."""

    def warm() -> None:
        import logging

        log = logging.getLogger("ragchat.runtime")
        try:
            asyncio.run(embedder().embed_query("warm-up"))
            asyncio.run(ready_vector_service())
            log.info("warm-up done", extra={"event": "warm_up"})
        except Exception as e:  # /health reports the failing part; warm-up only saves time
            log.warning("warm-up failed: %s", e, extra={"event": "warm_up_failed"})

    thread = threading.Thread(target=warm, name="ragchat-warm-up", daemon=True)
    thread.start()
    return thread
