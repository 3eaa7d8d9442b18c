"""Filtered search latency: upsert N synthetic chunks, then time VectorService.search (the
production path: access filter on every stage, dense + BM25, RRF, cosine scores)."""

from __future__ import annotations

import random
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from ragchat.bench.common import make_chunks, make_queries, pct
from ragchat.services.config import RAGSettings
from ragchat.services.embeddings import CachedEmbedder, HashingEmbedder
from ragchat.services.vector_store import PUBLIC_TAG, EdgeBackend, ServerBackend, VectorService


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
            await store._run(lambda: store._shard.optimize(), write=True)  # build HNSW like a settled index
            t_opt = time.perf_counter() - t0
        queries = make_queries(searches, rng)
        for query, tags in queries[:10]:  # warm-up
            await service.search(query, user_tags=tags)
        search_ms, total_ms = [], []
        for query, tags in queries:
            timings: dict = {}
            results = await service.search(query, user_tags=tags, limit=15, timings=timings)
            if not all(set(r.tags) & {PUBLIC_TAG, *tags} and r.tenant_id == "default" for r in results):
                raise AssertionError("a search returned a chunk outside its access filter")
            search_ms.append(timings["search"])
            total_ms.append(timings["embed"] + timings["search"])
        stats = await service.stats()
    finally:
        await service.close()
        if client is not None:
            if backend == "server":
                try:
                    await client.delete_collection(collection)
                except Exception:  # best effort: the scratch collection is uniquely named
                    pass
            await client.close()
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
    }
