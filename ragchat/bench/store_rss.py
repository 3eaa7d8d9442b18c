"""Memory of an open embedded store, measured in a process of its own (the benchmark's own Python
objects would otherwise count): open the shard at argv[1]/argv[2], run searches, print JSON with
the resident set size before opening and after searching."""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys

from ragchat.bench.common import make_queries, process_rss_mb


async def main(path: str, collection: str, searches: int) -> dict[str, float | None]:
    from ragchat.services.config import RAGSettings
    from ragchat.services.embeddings import CachedEmbedder, HashingEmbedder
    from ragchat.services.vector_store import EdgeBackend, VectorService

    settings = RAGSettings(qdrant_path=path, embedding_backend="hashing", embedding_model="hashing-384")
    before = process_rss_mb(os.getpid())
    service = VectorService(
        settings, CachedEmbedder(HashingEmbedder(), max_size=0), backend=EdgeBackend(path=path, collection=collection)
    )
    await service.initialize()
    try:
        for query, tags in make_queries(searches, random.Random(5)):
            await service.search(query, user_tags=tags)
        after = process_rss_mb(os.getpid())
    finally:
        await service.close()
    return {"rss_before_mb": before, "rss_open_mb": after}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))))
