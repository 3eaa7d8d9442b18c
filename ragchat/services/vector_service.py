"""Qdrant vector service (R-RET-1/2/3/6/8): chunks in, access-filtered hybrid search out.

Two interchangeable backends behind one small internal interface (`_Backend`):
- `EdgeBackend` (embedded default): Qdrant Edge, Qdrant's in-process Rust engine, on disk under
  settings.qdrant_path; no server. One shard per path per process (the WAL is locked by its opener).
- `ServerBackend` (scale-out): qdrant-client's AsyncQdrantClient at settings.qdrant_url. Any
  AsyncQdrantClient can be injected (tests use local mode, location=":memory:").

Both store the same points: a named dense vector "dense" (cosine), a named sparse vector "bm25"
(Modifier.IDF, vectors from ragchat.services.bm25), and the payload of a ChunkRecord.

Access control (R-RET-2) lives in `access_conditions()` and nowhere else: tenant_id equality AND
tags any-of (user_tags + "public"). A search is a batch of stages (dense, BM25), every one of
which carries that filter into the engine; the stages are fused (RRF) in Python, over hits that
were already filtered, and re-checked against the same conditions before anything is returned.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from ragchat.services.bm25 import SparseVec, bm25_document, bm25_query
from ragchat.services.config import RAGSettings
from ragchat.services.embeddings import Embedder
from ragchat.services.errors import CollectionMismatchError, EmbeddingError, VectorStoreError
from ragchat.services.retry import is_transient_error, retry_async
from ragchat.services.types import ChunkRecord, SearchResult

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Fixed namespace: point ids are uuid5(NAMESPACE, "{document_id}:{chunk_index}"), so re-upserting a
# chunk overwrites it instead of duplicating it, on any machine.
POINT_NAMESPACE = uuid.UUID("6f1c3e0a-4b7d-5c2e-9a8f-2d1e0b7c4a93")
DENSE = "dense"
SPARSE = "bm25"
PUBLIC_TAG = "public"
RRF_K = 60
SEARCH_HYBRID, SEARCH_DENSE, SEARCH_BM25 = "hybrid", "dense", "bm25"
SEARCH_MODES = (SEARCH_HYBRID, SEARCH_DENSE, SEARCH_BM25)
KEYWORD_FIELDS = ("tags", "tenant_id", "document_id")
PAYLOAD_FIELDS = (
    "document_id",
    "chunk_index",
    "document_name",
    "page_number",
    "section",
    "chunk_text",
    "tags",
    "tenant_id",
    "token_count",
)


def point_id(document_id: str, chunk_index: int) -> str:
    return str(uuid.uuid5(POINT_NAMESPACE, f"{document_id}:{chunk_index}"))


# --------------------------------------------------------------------------- neutral query model


@dataclass(frozen=True)
class Conditions:
    """A conjunction of payload conditions, translated by each backend into its filter type."""

    equals: tuple[tuple[str, str], ...] = ()
    any_of: tuple[tuple[str, tuple[str, ...]], ...] = ()


def access_conditions(*, user_tags: Sequence[str], tenant_id: str) -> Conditions:
    """THE access rule: same tenant, and at least one tag the user holds or "public"."""
    allowed = tuple(sorted({*(t for t in user_tags if t), PUBLIC_TAG}))
    return Conditions(equals=(("tenant_id", tenant_id),), any_of=(("tags", allowed),))


def scope_conditions(*, document_id: str | None = None, tenant_id: str | None = None) -> Conditions:
    equals = tuple(
        (key, value) for key, value in (("document_id", document_id), ("tenant_id", tenant_id)) if value
    )
    return Conditions(equals=equals)


@dataclass(frozen=True)
class PointData:
    id: str
    dense: list[float]
    sparse: SparseVec
    payload: dict[str, Any]


@dataclass(frozen=True)
class Hit:
    id: str
    score: float  # the stage's own score (RRF for hybrid, cosine for dense)
    payload: dict[str, Any]
    dense: list[float] | None = None


@dataclass(frozen=True)
class Stage:
    """One retrieval stage: nearest neighbours by the dense vector or by the BM25 sparse vector."""

    using: str  # DENSE or SPARSE
    vector: list[float] | SparseVec
    conditions: Conditions
    limit: int
    with_vector: bool = False  # return the dense vector (to compute cosine for keyword hits)


@dataclass(frozen=True)
class CollectionMeta:
    embedding_model: str
    dimension: int

    def as_dict(self) -> dict[str, Any]:
        return {"embedding_model": self.embedding_model, "dimension": self.dimension}


class _Backend(Protocol):
    name: str

    async def open(self, meta: CollectionMeta) -> CollectionMeta | None:
        """Create the collection and indexes if missing; return what an existing one was built with."""

    async def upsert(self, points: Sequence[PointData]) -> None: ...

    async def delete(self, conditions: Conditions) -> None: ...

    async def count(self, conditions: Conditions) -> int: ...

    async def distinct_count(self, key: str) -> int: ...

    async def search_stages(self, stages: Sequence[Stage]) -> list[list[Hit]]:
        """Run the stages as one batch; each stage carries (and must apply) its own filter."""

    async def close(self) -> None: ...


# --------------------------------------------------------------------------- Qdrant Edge backend


class _EdgeHandle:
    """One open shard per path per process, shared by every VectorService on that path."""

    def __init__(self, shard: Any) -> None:
        self.shard = shard
        self.write_lock = threading.Lock()  # updates one at a time; reads run alongside
        self.refs = 0


_edge_handles: dict[str, _EdgeHandle] = {}
_edge_handles_lock = threading.Lock()


class EdgeBackend:
    """Embedded Qdrant Edge shard at {qdrant_path}/{collection}; metadata in {collection}.meta.json."""

    name = "edge"

    def __init__(self, *, path: str | os.PathLike[str], collection: str) -> None:
        self.root = Path(path)
        self.shard_path = str((self.root / collection).resolve())
        self.meta_path = self.root / f"{collection}.meta.json"
        self._handle: _EdgeHandle | None = None

    # --- plumbing
    @property
    def _shard(self) -> Any:
        if self._handle is None:
            raise VectorStoreError("vector store is not initialised: call initialize() first")
        return self._handle.shard

    async def _run(self, fn: Callable[[], T], *, write: bool = False) -> T:
        """Run a blocking engine call in a worker thread; engine errors become VectorStoreError."""

        def call() -> T:
            if write:
                assert self._handle is not None
                with self._handle.write_lock:
                    return fn()
            return fn()

        try:
            return await asyncio.to_thread(call)
        except VectorStoreError:
            raise
        except Exception as e:
            raise VectorStoreError(f"Qdrant Edge at {self.shard_path}: {e}") from e

    @staticmethod
    def _filter(conditions: Conditions) -> Any:
        import qdrant_edge as qe

        must: list[Any] = [qe.FieldCondition(k, match=qe.MatchValue(v)) for k, v in conditions.equals]
        must += [qe.FieldCondition(k, match=qe.MatchAny(list(vs))) for k, vs in conditions.any_of]
        return qe.Filter(must=must) if must else None

    # --- lifecycle
    def _open_sync(self, meta: CollectionMeta) -> CollectionMeta | None:
        import qdrant_edge as qe

        with _edge_handles_lock:
            handle = _edge_handles.get(self.shard_path)
            if handle is None:
                exists = Path(self.shard_path).exists() and any(Path(self.shard_path).iterdir())
                if exists:
                    shard = qe.EdgeShard.load(self.shard_path)
                else:
                    self.root.mkdir(parents=True, exist_ok=True)
                    config = qe.EdgeConfig(
                        vectors={DENSE: qe.EdgeVectorParams(size=meta.dimension, distance=qe.Distance.Cosine)},
                        sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
                    )
                    shard = qe.EdgeShard.create(self.shard_path, config)
                handle = _EdgeHandle(shard)
                _edge_handles[self.shard_path] = handle
            handle.refs += 1
            self._handle = handle
        with handle.write_lock:
            indexed = set(handle.shard.info().payload_schema)
            for key in KEYWORD_FIELDS:
                if key not in indexed:
                    handle.shard.update(qe.UpdateOperation.create_field_index(key, qe.PayloadSchemaType.Keyword))
            return self._read_or_write_meta(meta)

    def _read_or_write_meta(self, meta: CollectionMeta) -> CollectionMeta | None:
        if self.meta_path.exists():
            data = json.loads(self.meta_path.read_text())
            return CollectionMeta(str(data["embedding_model"]), int(data["dimension"]))
        existing_dim = self._stored_dimension()
        if existing_dim is not None and existing_dim != meta.dimension:
            # Points without a metadata file: we can still tell the dimension from a stored vector.
            return CollectionMeta("unknown (no metadata recorded)", existing_dim)
        tmp = self.meta_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(meta.as_dict()))
        os.replace(tmp, self.meta_path)
        return None

    def _stored_dimension(self) -> int | None:
        import qdrant_edge as qe

        records, _ = self._shard.scroll(qe.ScrollRequest(limit=1, with_vector=[DENSE], with_payload=False))
        if not records:
            return None
        return len(records[0].vector[DENSE])

    async def open(self, meta: CollectionMeta) -> CollectionMeta | None:
        try:
            return await asyncio.to_thread(self._open_sync, meta)
        except VectorStoreError:
            raise
        except Exception as e:
            raise VectorStoreError(f"cannot open Qdrant Edge shard at {self.shard_path}: {e}") from e

    async def close(self) -> None:
        await asyncio.to_thread(self.release_sync)

    def release_sync(self) -> None:
        """Drop this backend's reference to the shard; the last one flushes and closes it."""
        handle, self._handle = self._handle, None
        if handle is None:
            return
        with _edge_handles_lock:
            handle.refs -= 1
            if handle.refs <= 0:
                with handle.write_lock:
                    handle.shard.flush()
                    handle.shard.close()
                _edge_handles.pop(self.shard_path, None)

    # --- writes
    async def upsert(self, points: Sequence[PointData]) -> None:
        import qdrant_edge as qe

        edge_points = [
            qe.Point(
                p.id,
                {DENSE: p.dense, SPARSE: qe.SparseVector(list(p.sparse.indices), list(p.sparse.values))},
                p.payload,
            )
            for p in points
        ]

        def write() -> None:
            self._shard.update(qe.UpdateOperation.upsert_points(edge_points))
            self._shard.flush()

        await self._run(write, write=True)

    async def delete(self, conditions: Conditions) -> None:
        import qdrant_edge as qe

        def write() -> None:
            self._shard.update(qe.UpdateOperation.delete_points_by_filter(self._filter(conditions)))
            self._shard.flush()

        await self._run(write, write=True)

    # --- reads
    async def count(self, conditions: Conditions) -> int:
        import qdrant_edge as qe

        return await self._run(lambda: self._shard.count(qe.CountRequest(exact=True, filter=self._filter(conditions))))

    async def distinct_count(self, key: str) -> int:
        import qdrant_edge as qe

        def facet() -> int:
            return len(self._shard.facet(qe.FacetRequest(key, limit=10_000_000, exact=True)).hits)

        return await self._run(facet)

    @staticmethod
    def _hits(points: Sequence[Any]) -> list[Hit]:
        out = []
        for p in points:
            vectors = p.vector or {}
            out.append(Hit(str(p.id), float(p.score), dict(p.payload or {}), vectors.get(DENSE)))
        return out

    async def search_stages(self, stages: Sequence[Stage]) -> list[list[Hit]]:
        import qdrant_edge as qe

        def request(stage: Stage) -> Any:
            if isinstance(stage.vector, SparseVec):
                vector: Any = qe.SparseVector(list(stage.vector.indices), list(stage.vector.values))
            else:
                vector = stage.vector
            return qe.QueryRequest(
                limit=stage.limit,
                query=qe.Query.Nearest(vector, using=stage.using),
                filter=self._filter(stage.conditions),
                with_payload=True,
                with_vector=[DENSE] if stage.with_vector else False,
            )

        batch = qe.QueryBatchRequest([request(stage) for stage in stages])
        return [self._hits(points) for points in await self._run(lambda: self._shard.query_batch(batch))]


# --------------------------------------------------------------------------- Qdrant server backend


def _is_transient(error: BaseException) -> bool:
    from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

    if isinstance(error, ResponseHandlingException):  # qdrant-client's wrapper of httpx errors
        source = getattr(error, "source", None)
        return source is not None and is_transient_error(source)
    if is_transient_error(error):
        return True
    if isinstance(error, UnexpectedResponse):
        return error.status_code in (429, 502, 503, 504)
    try:
        import grpc

        if isinstance(error, grpc.RpcError):
            return error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    except ImportError:  # grpc is optional
        pass
    return False


class ServerBackend:
    """A Qdrant server/cluster through AsyncQdrantClient; embedding metadata in collection metadata."""

    name = "server"

    def __init__(
        self,
        *,
        client: Any,
        collection: str,
        retry_attempts: int = 3,
        retry_initial_delay: float = 1.0,
        retry_max_delay: float = 10.0,
        owns_client: bool = False,
    ) -> None:
        self.client = client
        self.owns_client = owns_client  # an injected client is closed by whoever made it
        self.collection = collection
        self._retry = (retry_attempts, retry_initial_delay, retry_max_delay)

    async def _call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Transient errors retried with exponential backoff; everything else -> VectorStoreError."""
        attempts, delay, max_delay = self._retry
        try:
            return await retry_async(
                fn,
                attempts=attempts,
                initial_delay=delay,
                max_delay=max_delay,
                is_transient=_is_transient,
                what=f"qdrant {self.collection}",
            )
        except VectorStoreError:
            raise
        except Exception as e:
            raise VectorStoreError(f"Qdrant collection {self.collection!r}: {e}") from e

    @staticmethod
    def _filter(conditions: Conditions) -> Any:
        from qdrant_client import models as m

        must: list[Any] = [m.FieldCondition(key=k, match=m.MatchValue(value=v)) for k, v in conditions.equals]
        must += [m.FieldCondition(key=k, match=m.MatchAny(any=list(vs))) for k, vs in conditions.any_of]
        return m.Filter(must=must) if must else None

    async def open(self, meta: CollectionMeta) -> CollectionMeta | None:
        from qdrant_client import models as m

        async def ensure() -> CollectionMeta | None:
            if await self.client.collection_exists(self.collection):
                info = await self.client.get_collection(self.collection)
                recorded = info.config.metadata or {}
                vectors = info.config.params.vectors
                size = vectors[DENSE].size if isinstance(vectors, dict) and DENSE in vectors else None
                if size is None:
                    return CollectionMeta(str(recorded.get("embedding_model", "unknown")), -1)
                return CollectionMeta(str(recorded.get("embedding_model", "unknown (no metadata recorded)")), size)
            await self.client.create_collection(
                self.collection,
                vectors_config={DENSE: m.VectorParams(size=meta.dimension, distance=m.Distance.COSINE)},
                sparse_vectors_config={SPARSE: m.SparseVectorParams(modifier=m.Modifier.IDF)},
                metadata=meta.as_dict(),
            )
            for key in KEYWORD_FIELDS:
                await self.client.create_payload_index(self.collection, key, m.PayloadSchemaType.KEYWORD)
            return None

        import warnings

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Payload indexes have no effect")  # local mode only
            return await self._call(ensure)

    async def close(self) -> None:
        if self.owns_client:
            await self.client.close()

    async def upsert(self, points: Sequence[PointData]) -> None:
        from qdrant_client import models as m

        structs = [
            m.PointStruct(
                id=p.id,
                vector={
                    DENSE: p.dense,
                    SPARSE: m.SparseVector(indices=list(p.sparse.indices), values=list(p.sparse.values)),
                },
                payload=p.payload,
            )
            for p in points
        ]
        await self._call(lambda: self.client.upsert(self.collection, points=structs, wait=True))

    async def delete(self, conditions: Conditions) -> None:
        from qdrant_client import models as m

        selector = m.FilterSelector(filter=self._filter(conditions))
        await self._call(lambda: self.client.delete(self.collection, points_selector=selector, wait=True))

    async def count(self, conditions: Conditions) -> int:
        result = await self._call(
            lambda: self.client.count(self.collection, count_filter=self._filter(conditions), exact=True)
        )
        return int(result.count)

    async def distinct_count(self, key: str) -> int:
        result = await self._call(lambda: self.client.facet(self.collection, key=key, exact=True, limit=10_000_000))
        return len(result.hits)

    @staticmethod
    def _hits(points: Sequence[Any]) -> list[Hit]:
        out = []
        for p in points:
            vectors = p.vector if isinstance(p.vector, dict) else {}
            out.append(Hit(str(p.id), float(p.score), dict(p.payload or {}), vectors.get(DENSE)))
        return out

    async def search_stages(self, stages: Sequence[Stage]) -> list[list[Hit]]:
        from qdrant_client import models as m

        def request(stage: Stage) -> Any:
            vector: Any = stage.vector
            if isinstance(vector, SparseVec):
                vector = m.SparseVector(indices=list(vector.indices), values=list(vector.values))
            return m.QueryRequest(
                query=vector,
                using=stage.using,
                filter=self._filter(stage.conditions),
                limit=stage.limit,
                with_payload=True,
                with_vector=[DENSE] if stage.with_vector else False,
            )

        requests = [request(stage) for stage in stages]
        responses = await self._call(lambda: self.client.query_batch_points(self.collection, requests=requests))
        return [self._hits(response.points) for response in responses]


# --------------------------------------------------------------------------- the service


def _payload(chunk: ChunkRecord) -> dict[str, Any]:
    payload: dict[str, Any] = {
        key: value for key, value in chunk.metadata.items() if key not in PAYLOAD_FIELDS
    }
    payload.update(
        document_id=chunk.document_id,
        chunk_index=chunk.chunk_index,
        document_name=chunk.document_name,
        page_number=chunk.page_number,
        section=chunk.section,
        chunk_text=chunk.chunk_text,
        tags=list(chunk.tags),
        tenant_id=chunk.tenant_id,
        token_count=chunk.token_count,
    )
    return payload


def _result(payload: dict[str, Any], score: float) -> SearchResult:
    return SearchResult(
        document_id=str(payload.get("document_id", "")),
        chunk_index=int(payload.get("chunk_index", 0)),
        document_name=str(payload.get("document_name", "")),
        chunk_text=str(payload.get("chunk_text", "")),
        score=score,
        page_number=payload.get("page_number"),
        section=payload.get("section"),
        tags=list(payload.get("tags") or []),
        tenant_id=str(payload.get("tenant_id", "default")),
        token_count=payload.get("token_count"),
        metadata={k: v for k, v in payload.items() if k not in PAYLOAD_FIELDS},
    )


def _cosine(query: np.ndarray, vector: Sequence[float] | None, fallback: float) -> float:
    if vector is None:
        return max(0.0, min(1.0, fallback))
    v = np.asarray(vector, dtype=np.float64)
    denom = float(np.linalg.norm(query) * np.linalg.norm(v))
    if denom == 0.0:
        return 0.0
    return max(0.0, min(1.0, float(np.dot(query, v)) / denom))


class VectorService:
    """Chunks in Qdrant with access-filtered (hybrid) search.

    Score semantics of `search()`: results come in the fused order (RRF of the dense and BM25
    stages when settings.rag_hybrid_search, else dense order), ties broken by source id, but each
    `SearchResult.score` is the chunk's cosine similarity to the query embedding, clamped to 0-1:
    the dense stage's own (Qdrant cosine) score, or, for a hit only BM25 found, computed with numpy
    from the dense vector returned with it. RRF is fused client-side (not with the engine's
    Fusion.Rrf) so that ties are broken by source id (R-RET-6). RRF scores are rank-based and
    meaningless against the 0.3 similarity floor of spec v3; cosine is what that floor means. So a
    BM25-only hit whose meaning is far from the question keeps its place but gets a low score,
    and the quality filter downstream can still drop it.
    """

    def __init__(self, settings: RAGSettings, embedder: Embedder, *, backend: _Backend | None = None) -> None:
        self.settings = settings
        self.embedder = embedder
        self.backend = backend if backend is not None else self._default_backend(settings)
        self._meta: CollectionMeta | None = None
        self._init_lock: asyncio.Lock | None = None

    @classmethod
    def from_settings(cls, settings: RAGSettings, embedder: Embedder) -> VectorService:
        return cls(settings, embedder)

    @staticmethod
    def _default_backend(settings: RAGSettings) -> _Backend:
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
    def _backend(self) -> _Backend:
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

    async def initialize(self) -> None:
        """Create the collection and payload indexes if missing; refuse one built with another embedder."""
        if self._init_lock is None:
            self._init_lock = asyncio.Lock()
        async with self._init_lock:
            if self._meta is not None:
                return
            wanted = CollectionMeta(self.embedder.model_name, await self._dimension())
            existing = await self._backend.open(wanted)
            if existing is not None and existing != wanted:
                await self._backend.close()
                raise CollectionMismatchError(
                    f"Collection {self.settings.qdrant_collection!r} ({self._backend.name}) was built with "
                    f"embedding model {existing.embedding_model!r} ({existing.dimension} dims), but "
                    f"{wanted.embedding_model!r} ({wanted.dimension} dims) is configured. Either reindex "
                    "(delete the collection and re-ingest the documents with the configured model) or set "
                    "EMBEDDING_BACKEND/EMBEDDING_MODEL back to what the collection was built with."
                )
            self._meta = wanted

    async def _ready(self) -> None:
        if self._meta is None:
            await self.initialize()

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
                    payload=_payload(chunk),
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

    # --- reads
    async def count(self, *, document_id: str | None = None, tenant_id: str | None = None) -> int:
        await self._ready()
        return await self._backend.count(scope_conditions(document_id=document_id, tenant_id=tenant_id))

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
        conditions = access_conditions(user_tags=user_tags, tenant_id=tenant_id)
        prefetch = max(self.settings.rag_prefetch_limit, limit)
        stages = [Stage(DENSE, vector, conditions, prefetch)] if mode != SEARCH_BM25 else []
        sparse = bm25_query(query) if mode != SEARCH_DENSE else SparseVec((), ())
        if sparse.indices:
            stages.append(Stage(SPARSE, sparse, conditions, prefetch, with_vector=True))
        stage_hits = await self._backend.search_stages(stages) if stages else []
        results = _fuse(vector, stage_hits, conditions, dense_stage=0 if mode != SEARCH_BM25 else None)[:limit]
        results = [r for r in results if r.score >= score_threshold]
        if timings is not None:
            timings["embed"] = (embedded - started) * 1000.0
            timings["search"] = (time.perf_counter() - embedded) * 1000.0
        return results


def _allowed(payload: dict[str, Any], conditions: Conditions) -> bool:
    """Defence in depth: the engine filtered already; re-check so a mismatch can never leak."""
    equals_ok = all(payload.get(key) == value for key, value in conditions.equals)
    any_ok = all(set(payload.get(key) or ()) & set(values) for key, values in conditions.any_of)
    return equals_ok and any_ok


def _fuse(
    vector: list[float],
    stage_hits: Sequence[Sequence[Hit]],
    conditions: Conditions,
    *,
    dense_stage: int | None = 0,
) -> list[SearchResult]:
    """Reciprocal rank fusion of the stages, with every tie broken by source id (R-RET-6).

    Within a stage, hits are ranked by (-score, source id) so equal scores get a stable order;
    the fused list is sorted by (-sum of 1/(k + rank), source id). Each result's score is its
    cosine similarity: the dense stage's own score (Qdrant cosine) or, for a hit only the BM25
    stage found, computed from its stored dense vector.
    """
    query = np.asarray(vector, dtype=np.float64)
    fused: dict[str, float] = {}
    cosine: dict[str, float] = {}
    payloads: dict[str, dict[str, Any]] = {}
    keys: dict[str, tuple[str, int]] = {}
    for stage_index, hits in enumerate(stage_hits):
        admitted = []
        for hit in hits:
            if not _allowed(hit.payload, conditions):
                logger.error("vector store returned a chunk outside the access filter: %s", hit.id)
                continue
            keys[hit.id] = (str(hit.payload.get("document_id", "")), int(hit.payload.get("chunk_index", 0)))
            payloads[hit.id] = hit.payload
            if stage_index == dense_stage:
                cosine[hit.id] = max(0.0, min(1.0, hit.score))
            elif hit.id not in cosine:
                cosine[hit.id] = _cosine(query, hit.dense, 0.0)
            admitted.append(hit)
        admitted.sort(key=lambda h: (-round(h.score, 7), keys[h.id]))
        for rank, hit in enumerate(admitted, start=1):
            fused[hit.id] = fused.get(hit.id, 0.0) + 1.0 / (RRF_K + rank)
    order = sorted(fused, key=lambda pid: (-round(fused[pid], 12), keys[pid]))
    return [_result(payloads[pid], cosine[pid]) for pid in order]
