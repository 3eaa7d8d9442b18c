"""The embedded store: Qdrant Edge, Qdrant's in-process Rust engine, on disk; no server.

The shard lives at {qdrant_path}/{collection}, the embedding metadata in {collection}.meta.json.
An Edge shard's WAL is locked by its opener, so one shard per path per process is shared by every
backend on that path (reference-counted); writes go one at a time, reads run alongside.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ragchat.services.bm25 import SparseVec
from ragchat.services.errors import VectorStoreError
from ragchat.services.vector_store.access import Conditions
from ragchat.services.vector_store.backend import (
    DENSE_HNSW_EF,
    DENSE_OVERSAMPLING,
    DENSE_QUANTIZED_BITS,
    DENSE_SEGMENTS,
    HNSW_EF_CONSTRUCT,
    HNSW_M,
    SEARCH_THREADS,
    SPARSE_FULL_SCAN_MAX_POINTS,
    CollectionMeta,
    Hit,
    Stage,
    full_scan_threshold_kb,
)
from ragchat.services.vector_store.payload import DENSE, KEYWORD_FIELDS, SPARSE, PointData

T = TypeVar("T")

logger = logging.getLogger(__name__)


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
        """Run a blocking engine call in a worker thread (`_call`); a write holds the write lock."""

        def call() -> T:
            if write:
                assert self._handle is not None
                with self._handle.write_lock:
                    return fn()
            return fn()

        return await asyncio.to_thread(self._call, call)

    def _call(self, fn: Callable[[], T]) -> T:
        """Run an engine call on the calling thread; engine errors become VectorStoreError.

        Searches and fetches call it directly. Qdrant Edge holds Python's GIL through a query
        (measured: a Python thread beside a loop of queries got about half its speed alone, the
        share between queries), so a worker thread gave them no concurrency: only a thread hop and
        two hand-overs of the GIL per call, which in a burst of questions each waited for the busy
        event loop to let go (`_run` is kept for writes, which take the write lock, and for reads
        that page through the whole store)."""
        try:
            return fn()
        except VectorStoreError:
            raise
        except Exception as e:
            raise VectorStoreError(f"Qdrant Edge at {self.shard_path}: {e}") from e

    @staticmethod
    def _filter(conditions: Conditions) -> Any:
        import qdrant_edge as qe

        must: list[Any] = [qe.FieldCondition(k, match=qe.MatchValue(v)) for k, v in conditions.equals]
        must += [qe.FieldCondition(k, match=qe.MatchAny(list(vs))) for k, vs in conditions.any_of]
        must_not: list[Any] = [qe.FieldCondition(k, match=qe.MatchAny(list(vs))) for k, vs in conditions.none_of]
        if not must and not must_not:
            return None
        return qe.Filter(must=must or None, must_not=must_not or None)

    # --- lifecycle
    def _open_sync(self, meta: CollectionMeta) -> CollectionMeta | None:
        import qdrant_edge as qe

        with _edge_handles_lock:
            handle = _edge_handles.get(self.shard_path)
            if handle is None:
                exists = Path(self.shard_path).exists() and any(Path(self.shard_path).iterdir())
                if exists:
                    shard = self._load(meta)
                else:
                    self.root.mkdir(parents=True, exist_ok=True)
                    shard = qe.EdgeShard.create(self.shard_path, self._config(meta.dimension))
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

    @staticmethod
    def _config(dimension: int) -> Any:
        """The shard's configuration: one home for it, applied when a shard is made and each time
        one is opened (see `_load`)."""
        import qdrant_edge as qe

        return qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine)},
            sparse_vectors={
                SPARSE: qe.EdgeSparseVectorParams(
                    modifier=qe.Modifier.Idf, full_scan_threshold=SPARSE_FULL_SCAN_MAX_POINTS
                )
            },
            hnsw_config=qe.HnswIndexConfig(
                m=HNSW_M,
                ef_construct=HNSW_EF_CONSTRUCT,
                full_scan_threshold=full_scan_threshold_kb(dimension),
            ),
            quantization_config=qe.TurboQuantQuantizationConfig(
                always_ram=True, bits=getattr(qe.TurboQuantBitSize, f"Bits{DENSE_QUANTIZED_BITS}")
            ),
            optimizers=qe.EdgeOptimizersConfig(default_segment_number=DENSE_SEGMENTS),
            max_search_threads=SEARCH_THREADS,
        )

    def _load(self, meta: CollectionMeta) -> Any:
        """Open an existing shard with today's configuration: Edge checks it against the stored one
        and records it, and the next settle rebuilds the segments made under an older one (a store
        made with 8-bit scalar copies gets TurboQuant copies; until then its segments are searched
        as they are). A configuration the stored vectors cannot take (another dimension: the
        embedding model changed) is refused by Edge and changes nothing; the shard then opens as
        it is, says so in the log (for any other refusal it stays on its stored configuration, its
        compressed copies included), and `_read_or_write_meta` reports a dimension mismatch."""
        import qdrant_edge as qe

        try:
            return qe.EdgeShard.load(self.shard_path, self._config(meta.dimension))
        except Exception as e:
            if "incompatible" not in str(e).lower():
                raise
            logger.warning(
                "the vector store at %s keeps its stored configuration: Qdrant Edge refused today's (%s)",
                self.shard_path,
                e,
                extra={"event": "vector_store_config_kept"},
            )
            return qe.EdgeShard.load(self.shard_path)

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

    async def settle(self) -> None:
        """Build what Qdrant Edge leaves to its optimizer: the segments, their compressed vectors
        and graphs (and rebuild segments made under an older configuration, see `_load`). Edge
        has no background optimizer, and this call holds Python's GIL throughout (measured: no
        other thread of the process ran during its 5.4 s at 30k chunks; about 20 s at 100k), so it
        belongs in a process that serves nobody: `manage.py settle_index` and the bulk ingestion
        commands."""
        await self._run(lambda: self._shard.optimize(), write=True)

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

    async def drop(self) -> None:
        """Close the shard (every user of it in this process) and delete its files and metadata."""

        def remove() -> None:
            with _edge_handles_lock:
                handle = _edge_handles.pop(self.shard_path, None)
                if handle is not None:
                    with handle.write_lock:
                        handle.shard.close()
            self._handle = None
            shutil.rmtree(self.shard_path, ignore_errors=True)
            self.meta_path.unlink(missing_ok=True)

        await asyncio.to_thread(remove)

    async def export(self, batch_size: int = 512) -> AsyncIterator[list[PointData]]:
        import qdrant_edge as qe

        offset: Any = None
        while True:
            request = qe.ScrollRequest(limit=batch_size, offset=offset, with_vector=True, with_payload=True)

            def scroll(request: Any = request) -> tuple[list[Any], Any]:
                return self._shard.scroll(request)

            records, offset = await self._run(scroll)
            if records:
                yield [
                    PointData(
                        id=str(r.id),
                        dense=list(r.vector[DENSE]),
                        sparse=SparseVec(tuple(r.vector[SPARSE].indices), tuple(r.vector[SPARSE].values)),
                        payload=dict(r.payload),
                    )
                    for r in records
                ]
            if offset is None:
                return

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

    async def set_payload(self, conditions: Conditions, payload: dict[str, Any]) -> None:
        """Set these keys of every matching point's payload (others are kept)."""
        import qdrant_edge as qe

        def write() -> None:
            self._shard.update(qe.UpdateOperation.set_payload_by_filter(self._filter(conditions), dict(payload)))
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
    def _hits(points: Sequence[Any], *, bare: bool = False) -> list[Hit]:
        """Engine points as Hits; `bare`: ids and scores only (a search stage asked for no payload)."""
        if bare:
            return [Hit(str(p.id), p.score, {}) for p in points]
        out = []
        for p in points:
            vectors = p.vector or {}
            out.append(Hit(str(p.id), float(getattr(p, "score", 0.0)), dict(p.payload or {}), vectors.get(DENSE)))
        return out

    @staticmethod
    def dense_params(*, exact: bool = False) -> Any:
        """Filtered dense search: the compressed vectors rescored with the full ones, and a wide beam
        where the planner uses the graph (only for filters that leave more than
        EXACT_SEARCH_MAX_POINTS chunks, where ACORN's filter-aware walk only costs time: +1.3 ms
        p50 at 100k); `exact` reads the full vectors only."""
        import qdrant_edge as qe

        if exact:
            return qe.SearchParams(exact=True, quantization=qe.QuantizationSearchParams(ignore=True))
        return qe.SearchParams(
            hnsw_ef=DENSE_HNSW_EF,
            quantization=qe.QuantizationSearchParams(rescore=True, oversampling=DENSE_OVERSAMPLING),
        )

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
                with_payload=True if stage.keys is None else list(stage.keys) or False,
                with_vector=False,
                params=self.dense_params(exact=stage.exact) if stage.using == DENSE else None,
            )

        batch = qe.QueryBatchRequest([request(stage) for stage in stages])
        found = self._call(lambda: self._shard.query_batch(batch))
        return [self._hits(points, bare=stage.keys == ()) for stage, points in zip(stages, found, strict=True)]

    async def fetch(self, ids: Sequence[str], *, with_dense: bool = False) -> list[Hit]:
        if not ids:
            return []
        wanted = list(ids)
        records = self._call(lambda: self._shard.retrieve(wanted, True, [DENSE] if with_dense else False))
        return self._hits(records)
