"""Benchmark the vector store: upsert N chunks, then time filtered hybrid searches.

    .venv/bin/python scripts/bench_search.py            # 20,000 chunks, 200 searches
    .venv/bin/python scripts/bench_search.py --chunks 100000 --backend local   # qdrant-client local mode

The work is ragchat.bench.search.search_bench (also run by `manage.py bench`): HashingEmbedder
vectors (deterministic, 384 dims) over generated chunk texts with ~8 tags and 2 tenants; searches
are the production path (VectorService.search). Times: upsert wall time, and per search p50/p95
with the query embedding excluded ("search") and included ("embed+search").
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ragchat.bench.search import search_bench  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--backend", choices=["edge", "local", "server"], default="edge",
                        help="server: the Qdrant at QDRANT_URL (scratch collection)")
    args = parser.parse_args()
    result = asyncio.run(search_bench(chunks=args.chunks, searches=args.searches, backend=args.backend,
                                      batch=args.batch, qdrant_url=os.environ.get("QDRANT_URL", "")))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
