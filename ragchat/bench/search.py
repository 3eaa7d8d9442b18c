"""Filtered search latency: upsert N synthetic chunks, then time VectorService.search (the
production path: access filter on every stage, dense + BM25, RRF, cosine scores)."""

from __future__ import annotations

import asyncio
import random
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from ragchat.bench.common import make_chunks, make_queries, pct, run_bench_module, tie_aware_recall
from ragchat.services.config import RAGSettings
from ragchat.services.embeddings import CachedEmbedder, HashingEmbedder
from ragchat.services.vector_store import PUBLIC_TAG, EdgeBackend, ServerBackend, VectorService
from ragchat.services.vector_store.access import access_conditions
from ragchat.services.vector_store.backend import Stage
from ragchat.services.vector_store.payload import DENSE


async def search_bench(
    *,
    chunks: int,
    searches: int = 200,
    backend: str = "edge",
    batch: int = 256,
    qdrant_url: str = "",
    seed: int = 4,
) -> dict[str, Any]:
    """backend: "edge" (embedded default, temp dir), "local" (qdrant-client in memory) or "server"
    (the Qdrant at qdrant_url, in a scratch collection dropped afterwards)."""
    rng = random.Random(seed)
    workdir = Path(tempfile.mkdtemp(prefix="ragchat-bench-search-"))
    settings = RAGSettings(qdrant_path=str(workdir), embedding_backend="hashing", embedding_model="hashing-384")
    inner = HashingEmbedder()
    embedder = CachedEmbedder(inner, max_size=0)  # no cache: every query is really embedded
    collection = f"ragchat_bench_{uuid.uuid4().hex[:8]}"
    client = None
    if backend == "edge":
        store: Any = EdgeBackend(path=settings.qdrant_path, collection=settings.qdrant_collection)
    else:
        from qdrant_client import AsyncQdrantClient

        client = AsyncQdrantClient(location=":memory:") if backend == "local" else AsyncQdrantClient(url=qdrant_url)
        store = ServerBackend(client=client, collection=collection, owns_client=False)
    service = VectorService(settings, embedder, backend=store)
    try:
        await service.initialize()
        records = make_chunks(chunks, rng)
        t0 = time.perf_counter()
        vectors = [inner.embed_sync(c.chunk_text) for c in records]
        t_embed = time.perf_counter() - t0
        t0 = time.perf_counter()
        for start in range(0, len(records), batch):
            await service.upsert_chunks(records[start : start + batch], vectors[start : start + batch])
        t_upsert = time.perf_counter() - t0
        t_opt = 0.0
        if isinstance(store, EdgeBackend):
            t0 = time.perf_counter()
            await store.settle()  # build HNSW like a settled index
            t_opt = time.perf_counter() - t0
        queries = make_queries(searches, rng)
        for query, tags in queries[:10]:  # warm-up
            await service.search(query, user_tags=tags)
        search_ms, total_ms, recalls, dense_ms, exact_ms = [], [], [], [], []
        for query, tags in queries:
            timings: dict = {}
            results = await service.search(query, user_tags=tags, limit=15, timings=timings)
            if not all(set(r.tags) & {PUBLIC_TAG, *tags} and r.tenant_id == "default" for r in results):
                raise AssertionError("a search returned a chunk outside its access filter")
            search_ms.append(timings["search"])
            total_ms.append(timings["embed"] + timings["search"])
            recall, approx_ms, scan_ms = await dense_recall(store, inner.embed_sync(query), tags)
            if recall is not None:
                recalls.append(recall)
            dense_ms.append(approx_ms)
            exact_ms.append(scan_ms)
        stats = await service.stats()
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    finally:
        await service.close()
        if client is not None:
            if backend == "server":
                try:
                    await client.delete_collection(collection)
                except Exception:  # best effort: the scratch collection is uniquely named
                    pass
            await client.close()
    try:
        # The store's memory, in a process of its own once this one has closed the shard.
        store_rss = await asyncio.to_thread(_store_rss, settings) if backend == "edge" else {}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "backend": stats["backend"] if backend != "local" else "qdrant-client local",
        "chunks": stats["points"],
        "documents": stats["documents"],
        "embed_s": round(t_embed, 2),
        "upsert_s": round(t_upsert, 2),
        "upsert_chunks_per_s": round(chunks / t_upsert) if t_upsert else None,
        "optimize_s": round(t_opt, 2),
        "searches": searches,
        "search_p50_ms": round(statistics.median(search_ms), 2),
        "search_p95_ms": round(pct(search_ms, 0.95), 2),
        "embed_search_p50_ms": round(statistics.median(total_ms), 2),
        "embed_search_p95_ms": round(pct(total_ms, 0.95), 2),
        "store_rss_mb": store_rss.get("store_rss_mb"),
        "dense_recall@10": round(statistics.mean(recalls), 3) if recalls else None,
        "dense_p50_ms": round(statistics.median(dense_ms), 2),
        "dense_p95_ms": round(pct(dense_ms, 0.95), 2),
        "exact_p50_ms": round(statistics.median(exact_ms), 2),
        "exact_p95_ms": round(pct(exact_ms, 0.95), 2),
    }


async def dense_recall(
    store: Any, vector: list[float], tags: list[str], k: int = 10
) -> tuple[float | None, float, float]:
    """The dense stage as searches run it against an exact scan of the same filtered chunks:
    (recall@k, tie-aware: a hit scoring at least the exact k-th counts; its ms; the scan's ms)."""
    conditions = access_conditions(user_tags=tags, tenant_id="default")
    t0 = time.perf_counter()
    # Ids and scores only, as searches ask.
    (approx,) = await store.search_stages([Stage(DENSE, vector, conditions, k, keys=())])
    t1 = time.perf_counter()
    (exact,) = await store.search_stages([Stage(DENSE, vector, conditions, k, exact=True, keys=())])
    t2 = time.perf_counter()
    if not exact:
        return None, (t1 - t0) * 1000, (t2 - t1) * 1000
    recall = tie_aware_recall([hit.score for hit in approx], [hit.score for hit in exact])
    return recall, (t1 - t0) * 1000, (t2 - t1) * 1000


def _store_rss(settings: RAGSettings) -> dict[str, Any]:
    """The embedded store's memory once open and searched, in a fresh process (ragchat.bench.store_rss)."""
    try:
        figures = run_bench_module(
            "ragchat.bench.store_rss", settings.qdrant_path, settings.qdrant_collection, "50", timeout=600
        )
    except RuntimeError:
        return {}
    before, after = figures.get("rss_before_mb"), figures.get("rss_open_mb")
    return {"store_rss_mb": round(after - before, 1) if before and after else None}
