"""Benchmark the embedded vector store: upsert N chunks, then time filtered hybrid searches.

    .venv/bin/python scripts/bench_search.py            # 20,000 chunks, 200 searches
    .venv/bin/python scripts/bench_search.py --chunks 100000 --backend server   # qdrant-client local mode

Vectors come from the HashingEmbedder (deterministic, 384 dims) over generated, realistic-looking
chunk texts with ~8 tags and 2 tenants; searches are the production path (VectorService.search:
access filter on every stage, dense + BM25, RRF, cosine scores). Times: upsert wall time, and per
search p50/p95 with the query embedding excluded ("search") and included ("embed+search").
"""
from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ragchat.services.config import RAGSettings  # noqa: E402
from ragchat.services.embeddings import CachedEmbedder, HashingEmbedder  # noqa: E402
from ragchat.services.types import ChunkRecord  # noqa: E402
from ragchat.services.vector_service import EdgeBackend, ServerBackend, VectorService  # noqa: E402

TAGS = ["public", "hr", "finance", "it", "legal", "sales", "engineering", "security"]
WORDS = (
    "policy employee vacation leave expense report receipt salary band review vpn gateway access "
    "badge server room incident root cause deployment release contract customer invoice payment "
    "laptop password rotation onboarding offboarding benefits insurance pension travel hotel flight "
    "approval manager budget forecast quarter audit compliance gdpr retention backup restore "
    "kubernetes cluster database migration latency outage escalation ticket priority sla"
).split()


def make_chunks(n: int, rng: random.Random) -> list[ChunkRecord]:
    chunks = []
    doc = None
    for i in range(n):
        if i % 20 == 0:
            doc = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            tags = tuple(rng.sample(TAGS[1:], k=rng.choice([1, 1, 2]))) if rng.random() > 0.2 else ("public",)
            tenant = "default" if rng.random() > 0.1 else "acme"
        words = rng.choices(WORDS, k=rng.randint(120, 180))
        code = f"ERR-{rng.randint(1000, 9999)}"
        text = f"Section {i % 20}: {code} " + " ".join(words) + "."
        chunks.append(
            ChunkRecord(
                document_id=doc,
                chunk_index=i % 20,
                document_name=f"doc-{i // 20}.pdf",
                chunk_text=text,
                tags=tags,
                tenant_id=tenant,
                page_number=(i % 20) // 3 + 1,
                section=f"Section {i % 20}",
                token_count=len(words) + 4,
            )
        )
    return chunks


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def run(args: argparse.Namespace) -> None:
    rng = random.Random(4)
    workdir = Path(tempfile.mkdtemp(prefix="bench_search_"))
    settings = RAGSettings(qdrant_path=str(workdir), embedding_backend="hashing", embedding_model="hashing-384")
    inner = HashingEmbedder()
    embedder = CachedEmbedder(inner, max_size=0)  # no cache: every query is really embedded
    if args.backend == "edge":
        backend = EdgeBackend(path=settings.qdrant_path, collection=settings.qdrant_collection)
    else:
        from qdrant_client import AsyncQdrantClient

        backend = ServerBackend(client=AsyncQdrantClient(location=":memory:"), collection="bench", owns_client=True)
    service = VectorService(settings, embedder, backend=backend)
    await service.initialize()

    chunks = make_chunks(args.chunks, rng)
    t0 = time.perf_counter()
    vectors = [inner.embed_sync(c.chunk_text) for c in chunks]
    t_embed = time.perf_counter() - t0
    t0 = time.perf_counter()
    for start in range(0, len(chunks), args.batch):
        await service.upsert_chunks(chunks[start : start + args.batch], vectors[start : start + args.batch])
    t_upsert = time.perf_counter() - t0
    if isinstance(backend, EdgeBackend):
        t0 = time.perf_counter()
        await backend._run(lambda: backend._shard.optimize(), write=True)  # build HNSW like a settled index
        t_opt = time.perf_counter() - t0
    else:
        t_opt = 0.0

    queries = [" ".join(rng.choices(WORDS, k=rng.randint(3, 8))) for _ in range(args.searches)]
    queries = [q + (f" ERR-{rng.randint(1000, 9999)}" if i % 4 == 0 else "") for i, q in enumerate(queries)]
    user_tag_sets = [rng.sample(TAGS[1:], k=rng.randint(0, 2)) for _ in range(args.searches)]
    for q, tags in zip(queries[:10], user_tag_sets):  # warm-up
        await service.search(q, user_tags=tags)
    search_ms, total_ms = [], []
    for q, tags in zip(queries, user_tag_sets):
        timings: dict = {}
        results = await service.search(q, user_tags=tags, limit=15, timings=timings)
        assert all(set(r.tags) & {"public", *tags} for r in results)
        search_ms.append(timings["search"])
        total_ms.append(timings["embed"] + timings["search"])
    stats = await service.stats()
    await service.close()

    print(f"backend={stats['backend']} points={stats['points']} documents={stats['documents']} dim={stats['dimension']}")
    print(f"embed corpus (hashing): {t_embed:.2f} s; upsert: {t_upsert:.2f} s "
          f"({args.chunks / t_upsert:,.0f} chunks/s, batch {args.batch}); optimize: {t_opt:.2f} s")
    print(f"{args.searches} filtered hybrid searches, top 15, prefetch {settings.rag_prefetch_limit}:")
    print(f"  search only   p50 {statistics.median(search_ms):.2f} ms  p95 {pct(search_ms, 0.95):.2f} ms")
    print(f"  embed+search  p50 {statistics.median(total_ms):.2f} ms  p95 {pct(total_ms, 0.95):.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--backend", choices=["edge", "server"], default="edge")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
