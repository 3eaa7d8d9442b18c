"""The vector service: chunks in, access-filtered hybrid search out (R-RET-1/2/3/6/8).

It composes the parts of this package: a backend (`EdgeBackend` embedded by default,
`ServerBackend` when settings.qdrant_url is set), the access filter every stage carries
(`access.access_conditions`), the point payload (`payload`), and client-side fusion (`fusion`).
Both backends store the same points: a named dense vector "dense" (cosine), a named sparse vector
"bm25" (Modifier.IDF, vectors from ragchat.services.bm25), and the payload of a ChunkRecord.
A search is a batch of stages (dense, BM25), every one of which carries the access filter into the
engine; the stages are fused (RRF) in Python, over hits that were already filtered, and re-checked
against the same conditions before anything is returned.

References: requirement IDs (R-…): docs/requirements.md; "spec v3": docs/specs/rag-service-spec-v3-FINAL.md.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ragchat.services.bm25 import SparseVec, bm25_document, bm25_query
from ragchat.services.config import RAGSettings
from ragchat.services.embeddings import Embedder
from ragchat.services.errors import CollectionMismatchError, EmbeddingError
from ragchat.services.types import ChunkRecord, SearchResult
from ragchat.services.vector_store.access import Conditions, access_conditions, scope_conditions
from ragchat.services.vector_store.backend import Backend, CollectionMeta, Stage
from ragchat.services.vector_store.edge import EdgeBackend
from ragchat.services.vector_store.fusion import rank
from ragchat.services.vector_store.fusion import results as fused_results
from ragchat.services.vector_store.payload import (
    DENSE,
    PAYLOAD_FIELDS,
    SPARSE,
    PointData,
    chunk_payload,
    point_id,
    search_result,
)
from ragchat.services.vector_store.server import ServerBackend

SEARCH_HYBRID, SEARCH_DENSE, SEARCH_BM25 = "hybrid", "dense", "bm25"
SEARCH_MODES = (SEARCH_HYBRID, SEARCH_DENSE, SEARCH_BM25)


class VectorService:
    """Chunks in Qdrant with access-filtered (hybrid) search.

    Score semantics of `search()`: results come in the fused order (RRF of the dense and BM25
    stages when settings.rag_hybrid_search, else dense order), ties broken by point id (a function
    of the source id), but each `SearchResult.score` is the chunk's cosine similarity to the query
    embedding, clamped to 0-1: the dense stage's own (Qdrant cosine) score, or, for a hit only BM25
    found, computed with numpy from the dense vector fetched with it. RRF is fused client-side (not
    with the engine's Fusion.Rrf) so that ties are broken the same way on either backend
    (R-RET-6). RRF scores are rank-based and meaningless against the 0.3 similarity floor of spec v3
    (docs/specs/rag-service-spec-v3-FINAL.md); cosine is what that floor means. So a BM25-only hit
    whose meaning is far from the question keeps its place but gets a low score, and the quality
    filter downstream can still drop it.
    """

    def __init__(self, settings: RAGSettings, embedder: Embedder, *, backend: Backend | None = None) -> None:
        self.settings = settings
        self.embedder = embedder
        self.backend = backend if backend is not None else self._default_backend(settings)
        self._meta: CollectionMeta | None = None
        self._init_lock: asyncio.Lock | None = None

    @classmethod
    def from_settings(cls, settings: RAGSettings, embedder: Embedder) -> VectorService:
        return cls(settings, embedder)

    @staticmethod
    def _default_backend(settings: RAGSettings) -> Backend:
        if settings.qdrant_url:
            from qdrant_client import AsyncQdrantClient

            client = AsyncQdrantClient(url=settings.qdrant_url, api_key=settings.qdrant_api_key or None)
            return ServerBackend(
                client=client,
                collection=settings.qdrant_collection,
                retry_attempts=settings.rag_retry_attempts,
                retry_initial_delay=settings.rag_retry_initial_delay,
                retry_max_delay=settings.rag_retry_max_delay,
                owns_client=True,
            )
        return EdgeBackend(path=settings.qdrant_path, collection=settings.qdrant_collection)

    @property
    def _backend(self) -> Backend:
        assert self.backend is not None
        return self.backend

    # --- lifecycle
    async def _dimension(self) -> int:
        discover = getattr(self.embedder, "discover_dimension", None)
        if not self.embedder.dimension and discover is not None:
            try:
                await discover()
            except EmbeddingError:
                raise
            except Exception as e:
                raise EmbeddingError(f"cannot discover the embedding dimension: {e}") from e
        return int(self.embedder.dimension)

    async def configured_meta(self) -> CollectionMeta:
        """What a collection for the configured embedder is built with (model name, dimension)."""
        return CollectionMeta(self.embedder.model_name, await self._dimension())

    async def initialize(self) -> None:
        """Create the collection and payload indexes if missing; refuse one built with another embedder."""
        if self._init_lock is None:
            self._init_lock = asyncio.Lock()
        async with self._init_lock:
            if self._meta is not None:
                return
            wanted = await self.configured_meta()
            existing = await self._backend.open(wanted)
            if existing is not None and existing != wanted:
                await self._backend.close()
                raise CollectionMismatchError(
                    f"Collection {self.settings.qdrant_collection!r} ({self._backend.name}) was built with "
                    f"embedding model {existing.embedding_model!r} ({existing.dimension} dims), but "
                    f"{wanted.embedding_model!r} ({wanted.dimension} dims) is configured. Either reindex "
                    "(`manage.py reindex`: a new collection, every document re-embedded with the configured model) "
                    "or set EMBEDDING_BACKEND/EMBEDDING_MODEL back to what the collection was built with."
                )
            self._meta = wanted

    async def _ready(self) -> None:
        if self._meta is None:
            await self.initialize()

    async def settle(self) -> None:
        """Let the store finish its lazily built parts (EdgeBackend.settle: only in a process that
        serves nobody); seconds at 100k chunks, nothing when little changed since the last time."""
        await self._ready()
        await self._backend.settle()

    async def close(self) -> None:
        await self._backend.close()
        self._meta = None

    def close_sync(self) -> None:
        """Release an embedded shard from sync code (tests, shutdown). A server client needs its
        event loop to close; it is left to the garbage collector here."""
        release = getattr(self._backend, "release_sync", None)
        if release is not None:
            release()
        self._meta = None

    async def drop(self) -> None:
        """Delete the collection (restore, reindex); the next use creates it for the configured embedder."""
        await self._backend.drop()
        self._meta = None

    async def export_points(self, batch_size: int = 512) -> AsyncIterator[list[PointData]]:
        """Every stored point in batches, as stored (a backup)."""
        await self._ready()
        async for batch in self._backend.export(batch_size):
            yield batch

    async def import_points(self, points: Sequence[PointData]) -> int:
        """Store exported points as they are (a restore); their dimension must be the collection's."""
        await self._ready()
        assert self._meta is not None
        for p in points:
            if len(p.dense) != self._meta.dimension:
                raise EmbeddingError(f"point of {len(p.dense)} dims for a {self._meta.dimension}-dim collection")
        if points:
            await self._backend.upsert(points)
        return len(points)

    # --- writes
    async def upsert_chunks(
        self, chunks: Sequence[ChunkRecord], vectors: Sequence[Sequence[float]] | None = None
    ) -> int:
        """Store chunks (embedding them unless vectors are given); idempotent per (document, chunk index)."""
        if not chunks:
            return 0
        await self._ready()
        assert self._meta is not None
        if vectors is None:
            vectors = await self.embedder.embed_documents([c.chunk_text for c in chunks])
        if len(vectors) != len(chunks):
            raise EmbeddingError(f"{len(vectors)} vectors for {len(chunks)} chunks")
        points = []
        for chunk, vector in zip(chunks, vectors):
            if len(vector) != self._meta.dimension:
                raise EmbeddingError(
                    f"vector of {len(vector)} dims for a {self._meta.dimension}-dim collection ({chunk.source_id})"
                )
            points.append(
                PointData(
                    id=point_id(chunk.document_id, chunk.chunk_index),
                    dense=[float(x) for x in vector],
                    sparse=bm25_document(chunk.chunk_text),
                    payload=chunk_payload(chunk),
                )
            )
        await self._backend.upsert(points)
        return len(points)

    async def delete_document(self, document_id: str, *, tenant_id: str | None = None) -> int:
        """Delete every chunk of a document (optionally only in one tenant); returns how many went."""
        await self._ready()
        scope = scope_conditions(document_id=document_id, tenant_id=tenant_id)
        found = await self._backend.count(scope)
        if found:
            await self._backend.delete(scope)
        return found

    async def set_document_payload(
        self, document_id: str, payload: dict[str, Any], *, tenant_id: str | None = None
    ) -> int:
        """Set these payload keys on every chunk of a document (e.g. verified knowledge that needs
        review stops saying verified) without re-embedding; returns how many chunks it touched."""
        await self._ready()
        reserved = sorted(set(payload) & set(PAYLOAD_FIELDS))
        if reserved:
            raise ValueError(f"set_document_payload may not change {', '.join(reserved)}")
        scope = scope_conditions(document_id=document_id, tenant_id=tenant_id)
        found = await self._backend.count(scope)
        if found:
            await self._backend.set_payload(scope, payload)
        return found

    # --- reads
    async def count(self, *, document_id: str | None = None, tenant_id: str | None = None) -> int:
        await self._ready()
        return await self._backend.count(scope_conditions(document_id=document_id, tenant_id=tenant_id))

    async def document_chunks(self, document_id: str, *, tenant_id: str, count: int) -> list[SearchResult]:
        """The stored chunks of one document, in order (the viewer and "Chunks as indexed"): fetched
        by their point ids (chunk indexes 0..count-1), so no filter scan; another tenant's are left out."""
        await self._ready()
        if count <= 0:
            return []
        hits = await self._backend.fetch([point_id(document_id, i) for i in range(count)])
        found = [
            search_result(hit.payload, 0.0)
            for hit in hits
            if hit.payload.get("document_id") == document_id and hit.payload.get("tenant_id") == tenant_id
        ]
        return sorted(found, key=lambda r: r.chunk_index)

    async def stats(self) -> dict[str, Any]:
        await self._ready()
        assert self._meta is not None
        return {
            "backend": self._backend.name,
            "points": await self._backend.count(Conditions()),
            "documents": await self._backend.distinct_count("document_id"),
            "dimension": self._meta.dimension,
            "embedding_model": self._meta.embedding_model,
        }

    async def search(
        self,
        query: str,
        *,
        user_tags: Sequence[str],
        tenant_id: str = "default",
        limit: int = 15,
        score_threshold: float = 0.0,
        timings: dict | None = None,
        mode: str | None = None,
    ) -> list[SearchResult]:
        """Top `limit` chunks the user may read, in fused order, scored by cosine similarity (0-1).

        `mode` picks the stages: "hybrid" (dense + BM25, RRF), "dense" or "bm25" (one stage, its own
        order); None follows settings.rag_hybrid_search. Evaluation compares the three with it.
        """
        await self._ready()
        if limit <= 0:
            return []
        mode = mode or (SEARCH_HYBRID if self.settings.rag_hybrid_search else SEARCH_DENSE)
        if mode not in SEARCH_MODES:
            raise ValueError(f"search mode {mode!r}: expected one of {', '.join(SEARCH_MODES)}")
        started = time.perf_counter()
        vector = await self.embedder.embed_query(query)
        embedded = time.perf_counter()
        conditions = access_conditions(
            user_tags=user_tags, tenant_id=tenant_id, cite_needs_review=self.settings.rag_needs_review_cited
        )
        prefetch = max(self.settings.rag_prefetch_limit, limit)
        # Two steps: the stages return ids and scores only (ranking needs no payload); then the
        # whole payload of the `limit` ranked first is fetched (and the dense vector of those only
        # BM25 found), and checked against the access conditions again. Payloads and vectors of
        # every candidate were most of a search's time.
        stages = [Stage(DENSE, vector, conditions, prefetch, keys=())] if mode != SEARCH_BM25 else []
        sparse = bm25_query(query) if mode != SEARCH_DENSE else SparseVec((), ())
        if sparse.indices:
            stages.append(Stage(SPARSE, sparse, conditions, prefetch, keys=()))
        stage_hits = await self._backend.search_stages(stages) if stages else []
        ranked = rank(stage_hits, dense_stage=0 if mode != SEARCH_BM25 else None)[:limit]
        points = await self._backend.fetch(
            [pid for pid, _ in ranked], with_dense=any(score is None for _, score in ranked)
        )
        results = [r for r in fused_results(vector, ranked, points, conditions) if r.score >= score_threshold]
        if timings is not None:
            timings["embed"] = (embedded - started) * 1000.0
            timings["search"] = (time.perf_counter() - embedded) * 1000.0
        return results
