"""The process's RAG parts: one `RAGComponents` (embedder, vector service, LLM client, reranker,
RAGService) built from settings.RAG, and `components()`, the accessor views, consumers and tasks use.

The ASGI startup (ragchat/asgi.py) builds the parts once and warms them up; a process without it
(management commands, workers, tests) builds them on first use. In embedded mode the on-disk Qdrant
may be opened by one process only, so every vector-store access goes through these parts inside the
server process.

This module imports no app: the tag-owner lookup the RAGService routes with is handed in by the app
that owns tags (documents/apps.py calls `provide_owner_lookup()` when Django starts).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
from dataclasses import dataclass, field

from django.conf import settings

from ragchat.services.config import RAGSettings
from ragchat.services.embeddings import Embedder, build_embedder
from ragchat.services.llm import LLMClient, import_model_clients
from ragchat.services.llm_provider import build_llm
from ragchat.services.rag_service import RAGService
from ragchat.services.reranking import CrossEncoderReranker, build_reranker
from ragchat.services.routing import OwnerLookup
from ragchat.services.vector_store import VectorService

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class RAGComponents:
    """The RAG parts of one configuration. Building them does no I/O: the vector store opens on the
    first `ready_vector_service()`, the embedding model and the cross-encoder load on first use."""

    settings: RAGSettings
    embedder: Embedder
    vector_service: VectorService
    llm: LLMClient
    reranker: CrossEncoderReranker | None
    rag_service: RAGService
    _init_lock: asyncio.Lock | None = field(default=None, repr=False)
    _initialized: bool = field(default=False, repr=False)

    @classmethod
    def build(cls, *, settings: RAGSettings, owner_lookup: OwnerLookup | None) -> RAGComponents:
        embedder = build_embedder(settings)
        vectors = VectorService.from_settings(settings, embedder)
        llm = build_llm(settings)
        reranker = build_reranker(settings)
        rag = RAGService(vectors, settings, llm=llm, owner_lookup=owner_lookup, reranker=reranker)
        return cls(
            settings=settings, embedder=embedder, vector_service=vectors, llm=llm, reranker=reranker, rag_service=rag
        )

    async def ready_vector_service(self) -> VectorService:
        """The vector service, its collection opened (or created) once. A client process of the
        embedded store (ragchat/processes.py) never opens it: StoreNotInThisProcess."""
        if not self._initialized:
            _refuse_store_in_client()
            if self._init_lock is None:
                self._init_lock = asyncio.Lock()
            async with self._init_lock:
                if not self._initialized:
                    await self.vector_service.initialize()
                    self._initialized = True
        return self.vector_service

    def close(self) -> None:
        """Release what holds files or sockets (the embedded store's shard)."""
        self.vector_service.close_sync()


def _refuse_store_in_client() -> None:
    from ragchat import processes

    if not processes.opens_store():
        raise processes.StoreNotInThisProcess(
            "This process is a client of the embedded vector store (RAGCHAT_STORE_ROLE=client): the request "
            "should have gone to the holder (docs/deploying.md, Scale-out)."
        )


_lock = threading.Lock()
_components: RAGComponents | None = None
_owner_lookup: OwnerLookup | None = None


def provide_owner_lookup(lookup: OwnerLookup) -> None:
    """Called by the app that owns tags when Django starts. Parts built before it would route every
    question to the admin, so they are dropped and rebuilt with the lookup."""
    global _owner_lookup
    _owner_lookup = lookup
    reset()


def components() -> RAGComponents:
    """The process's parts, built from settings.RAG on first use (or after `reset()`)."""
    global _components
    built = _components
    if built is None:
        with _lock:
            built = _components
            if built is None:
                built = _components = RAGComponents.build(settings=settings.RAG, owner_lookup=_owner_lookup)
    return built


def install(parts: RAGComponents) -> None:
    """Use `parts` from now on (a test that brings its own embedder, say); `reset()` forgets them.
    The parts replaced are not closed: the new ones may share pieces with them."""
    global _components
    with _lock:
        _components = parts


def reset() -> None:
    """Forget the parts (tests, or after settings change); the next `components()` builds new ones
    from settings.RAG. Closes what holds files or sockets."""
    global _components
    with _lock:
        old, _components = _components, None
    if old is not None:
        old.close()


def start(*, warm_up: bool) -> RAGComponents:
    """The server's start-up: build the parts now and, with `warm_up`, load the embedding model and
    open the vector store off the request path, so the first question does not wait for them."""
    built = components()
    if warm_up:
        import_model_clients()  # before settle_heap: what it builds is frozen with the rest
        warm_up_in_background()
    return built


# Container allocations between two young garbage collections (Python's default: 700). Measured
# with `bench` (200 questions at once): with 700 the collector ran about 1,150 young, 105 middle and
# 9 full collections in one run, each full one stopping the event loop for 150-340 ms in the middle
# of a burst (docs/performance.md, "Bursts: one event loop").
GC_YOUNG_ALLOCATIONS = 10_000


def settle_heap() -> None:
    """The server's heap after start-up: what importing Django, the apps and the RAG parts built
    (about two thirds of a serving process's objects) is collected once and frozen, so no later
    collection walks it again, and young collections run less often (GC_YOUNG_ALLOCATIONS).

    A full collection walks every tracked object: about 300,000 in a server under load, 0.2-0.3 s
    on the 2-core development machine, all of it time the event loop stands still. Frozen objects are
    still freed when nothing refers to them; only reference cycles among them are never collected,
    and what start-up built lives as long as the process anyway."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_ALLOCATIONS, 10, 10)


def warm_up_in_background() -> threading.Thread:
    def warm() -> None:
        try:
            parts = components()
            asyncio.run(parts.embedder.embed_query("warm-up"))
            asyncio.run(parts.ready_vector_service())
            logger.info("warm-up done", extra={"event": "warm_up"})
        except Exception as e:  # /health reports the failing part; warm-up only saves time
            logger.warning("warm-up failed: %s", e, extra={"event": "warm_up_failed"})

    thread = threading.Thread(target=warm, name="ragchat-warm-up", daemon=True)
    thread.start()
    return thread


# The accessors the apps call: each returns one part of `components()`.


def rag_settings() -> RAGSettings:
    """The RAG settings now in force (settings.RAG; a test may replace it before `reset()`)."""
    return settings.RAG


def embedder() -> Embedder:
    return components().embedder


def vector_service() -> VectorService:
    """The VectorService (not yet initialised; use `await ready_vector_service()` on async paths)."""
    return components().vector_service


async def ready_vector_service() -> VectorService:
    return await components().ready_vector_service()


def llm() -> LLMClient:
    return components().llm


def reranker() -> CrossEncoderReranker | None:
    """The cross-encoder of RAG_RERANKER, or None (no rerank stage)."""
    return components().reranker


def rag_service() -> RAGService:
    return components().rag_service
