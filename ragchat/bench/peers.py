"""`manage.py bench --peers`: the same chunks and filtered queries in the systems a team might pick
instead of ragchat's store, side by side in one run: build time, p50/p95 of the filtered dense
top-10, recall@10 against an exact scan, and the memory each takes.

Every system runs in a process of its own (`python -m ragchat.bench.peers SYSTEM DATA_DIR`), so its
memory is its own and one system's caches never warm another's. The data is written once: the
bench's synthetic chunks (ragchat/bench/common.py) and their hashing vectors, with each chunk's
tenant and tags; a query is a vector plus its asker's tags, and the filter is the product's access
rule (the asker's tenant, and the public tag or one of theirs).

- numpy: an exact scan of the filtered rows, the physical limit of exactness (and the truth that
  every recall here is measured against: tie-aware, a hit scoring at least the exact 10th counts).
- ragchat: the product's embedded Qdrant Edge store, the dense stage exactly as a search runs it
  (payload indexes, the access filter, the store's planning), after the index has settled.
- lancedb and chroma, when installed (`pip install '.[peers]'`): LanceDB with an IVF_PQ index and
  its default prefilter, Chroma's HNSW with a metadata `where`. Not installed: reported as such.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ragchat.bench.common import (
    TAGS,
    make_chunks,
    make_queries,
    pct,
    process_rss_mb,
    run_bench_module,
    tie_aware_recall,
)
from ragchat.services.vector_store import PUBLIC_TAG

SYSTEMS = ("numpy", "ragchat", "lancedb", "chroma")
K = 10
TENANT = "default"


def write_data(
    directory: Path,
    *,
    chunks: int,
    searches: int,
    seed: int = 4,
    real: bool = False,
    runtime: str = "onnx-int8",
    cache_dir: Path | None = None,
) -> None:
    """The chunks, their vectors and the queries, once, for every system to load. `real`: passages
    of real prose on this machine embedded by the local model (real_set), else the hashing vectors
    of the bench's synthetic chunks."""
    rng = random.Random(seed)
    queries = make_queries(searches, rng)
    if real:
        texts, vectors, query_vectors = real_set(chunks, searches, seed=seed, runtime=runtime, cache_dir=cache_dir)
        records = make_chunks(chunks, rng, texts=texts)
    else:
        from ragchat.services.embeddings import HashingEmbedder

        embedder = HashingEmbedder()
        records = make_chunks(chunks, rng)
        vectors = np.array([embedder.embed_sync(r.chunk_text) for r in records], dtype=np.float32)
        query_vectors = np.array([embedder.embed_sync(q) for q, _ in queries], dtype=np.float32)
    np.save(directory / "vectors.npy", vectors)
    np.save(directory / "queries.npy", query_vectors)
    meta = {
        "chunks": [
            {"document_id": r.document_id, "chunk_index": r.chunk_index, "tenant": r.tenant_id, "tags": list(r.tags)}
            for r in records
        ],
        "query_tags": [tags for _, tags in queries],
    }
    (directory / "meta.json").write_text(json.dumps(meta))


# ------------------------------------------------------------------------------- the real set

PASSAGE_WORDS = 110


def _prose() -> Any:
    """Real English prose found on any machine of ours, in a fixed order: the descriptions of the
    installed Python packages, then Debian's documentation (changelogs, READMEs, copyright notes)."""
    import gzip
    from importlib import metadata

    names = sorted({(d.metadata["Name"] or "").lower() for d in metadata.distributions()} - {""})
    for name in names:
        body = metadata.metadata(name).get_payload()  # type: ignore[attr-defined]
        if isinstance(body, str):
            yield body
    root = Path("/usr/share/doc")
    for path in sorted(root.rglob("*")) if root.is_dir() else []:
        if not path.is_file() or path.stat().st_size > 2_000_000:
            continue
        try:
            yield gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
        except (OSError, UnicodeDecodeError, gzip.BadGzipFile, EOFError):
            continue


def real_texts(n: int) -> list[str]:
    """`n` distinct passages of PASSAGE_WORDS words of that prose."""
    seen: set[str] = set()
    passages: list[str] = []
    for text in _prose():
        words = [w for w in text.split() if any(c.isalpha() for c in w)]
        for start in range(0, len(words) - PASSAGE_WORDS + 1, PASSAGE_WORDS):
            passage = " ".join(words[start : start + PASSAGE_WORDS])
            if passage not in seen:
                seen.add(passage)
                passages.append(passage)
                if len(passages) == n:
                    return passages
    raise RuntimeError(f"only {len(passages)} passages of real prose on this machine; asked for {n}")


def real_set(
    n: int, searches: int, *, seed: int = 4, runtime: str = "onnx-int8", cache_dir: Path | None = None
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The passages, their vectors from the local model (on `runtime`) and `searches` questions (a
    few words from a passage, as someone recalls them), embedded by the same model. Vectors are
    cached (default ~/.cache/ragchat/bench): embedding 20k passages takes minutes."""
    from ragchat.services.embeddings import LocalEmbedder
    from ragchat.services.onnx_model import default_dir

    texts = real_texts(n)
    rng = random.Random(seed)
    questions = []
    for _ in range(searches):
        words = rng.choice(texts).split()
        start = rng.randrange(0, len(words) - 12)
        questions.append(" ".join(words[start : start + rng.randint(5, 12)]))
    cache = (cache_dir or default_dir().parent / "bench") / f"real-{n}-{searches}-{seed}-{runtime}.npz"
    if cache.exists():
        stored = np.load(cache)
        return texts, stored["vectors"], stored["queries"]
    embedder = LocalEmbedder(runtime=runtime)
    loop = asyncio.new_event_loop()
    try:
        vectors = []
        for start in range(0, n, 512):
            vectors.extend(loop.run_until_complete(embedder.embed_documents(texts[start : start + 512])))
            print(f"embedded {min(n, start + 512)} of {n} passages", file=sys.stderr, flush=True)
        queries = loop.run_until_complete(embedder.embed_queries(questions))
    finally:
        loop.close()
    cache.parent.mkdir(parents=True, exist_ok=True)
    out = {"vectors": np.array(vectors, dtype=np.float32), "queries": np.array(queries, dtype=np.float32)}
    np.savez(cache, **out)
    return texts, out["vectors"], out["queries"]


class _Data:
    def __init__(self, directory: Path) -> None:
        self.vectors = np.load(directory / "vectors.npy")
        self.queries = np.load(directory / "queries.npy")
        meta = json.loads((directory / "meta.json").read_text())
        self.chunks: list[dict[str, Any]] = meta["chunks"]
        self.query_tags: list[list[str]] = meta["query_tags"]
        self.row_of = {(c["document_id"], c["chunk_index"]): i for i, c in enumerate(self.chunks)}
        self._tenant = np.array([c["tenant"] == TENANT for c in self.chunks])
        self._has = {tag: np.array([tag in c["tags"] for c in self.chunks]) for tag in TAGS}

    def allowed(self, tags: list[str]) -> np.ndarray:
        """The rows the access rule lets an asker with `tags` see: the tenant, and public or a tag of theirs."""
        mask = self._has[PUBLIC_TAG].copy()
        for tag in tags:
            mask |= self._has[tag]
        return mask & self._tenant


# ----------------------------------------------------------------------------------- systems


def _numpy(data: _Data, workdir: Path) -> tuple[float, Any]:
    t0 = time.perf_counter()
    matrix = np.ascontiguousarray(data.vectors)
    build = time.perf_counter() - t0

    def search(vector: np.ndarray, tags: list[str]) -> list[int]:
        # Every row scored in one pass over memory, the filtered-out ones then set aside: cheaper
        # than first gathering the allowed rows (a copy of half the matrix).
        mask = data.allowed(tags)
        scores = matrix @ vector
        scores[~mask] = -np.inf
        allowed = int(mask.sum())
        if allowed == 0:
            return []
        top = np.argpartition(-scores, K)[:K] if allowed > K else np.flatnonzero(mask)
        return [int(r) for r in top[np.argsort(-scores[top])] if mask[r]][:K]

    return build, search


def _ragchat(data: _Data, workdir: Path) -> tuple[float, Any]:
    from ragchat.services.config import RAGSettings
    from ragchat.services.embeddings import HashingEmbedder
    from ragchat.services.types import ChunkRecord
    from ragchat.services.vector_store import EdgeBackend, VectorService
    from ragchat.services.vector_store.access import access_conditions
    from ragchat.services.vector_store.backend import Stage
    from ragchat.services.vector_store.payload import DENSE, point_id

    loop = asyncio.new_event_loop()
    settings = RAGSettings(qdrant_path=str(workdir / "qdrant"), embedding_backend="hashing")
    store = EdgeBackend(path=settings.qdrant_path, collection=settings.qdrant_collection)
    service = VectorService(settings, HashingEmbedder(), backend=store)
    records = [
        ChunkRecord(
            document_id=c["document_id"],
            chunk_index=c["chunk_index"],
            document_name="bench",
            chunk_text=f"chunk {i}",
            tags=tuple(c["tags"]),
            tenant_id=c["tenant"],
        )
        for i, c in enumerate(data.chunks)
    ]
    t0 = time.perf_counter()
    loop.run_until_complete(service.initialize())
    for start in range(0, len(records), 256):
        loop.run_until_complete(
            service.upsert_chunks(records[start : start + 256], data.vectors[start : start + 256].tolist())
        )
    loop.run_until_complete(store.settle())
    build = time.perf_counter() - t0
    row_of_point = {point_id(doc, index): row for (doc, index), row in data.row_of.items()}

    def search(vector: np.ndarray, tags: list[str]) -> list[int]:
        # As a chat search's stages do, and like the peers (LanceDB selects its row, Chroma
        # includes nothing): ids and scores only, no payload.
        conditions = access_conditions(user_tags=tags, tenant_id=TENANT)
        stage = Stage(DENSE, vector.tolist(), conditions, K, keys=())
        (hits,) = loop.run_until_complete(store.search_stages([stage]))
        return [row_of_point[h.id] for h in hits]

    return build, search


def _lancedb(data: _Data, workdir: Path) -> tuple[float, Any]:
    import lancedb
    import pyarrow as pa

    t0 = time.perf_counter()
    db = lancedb.connect(str(workdir / "lance"))
    table = db.create_table(
        "chunks",
        pa.table(
            {
                "row": pa.array(range(len(data.chunks)), pa.int64()),
                "tenant": [c["tenant"] for c in data.chunks],
                "tags": [c["tags"] for c in data.chunks],
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(data.vectors.ravel()), data.vectors.shape[1]),
            }
        ),
    )
    table.create_index(metric="cosine", index_type="IVF_PQ", vector_column_name="vector")
    table.create_scalar_index("tenant")
    build = time.perf_counter() - t0

    def search(vector: np.ndarray, tags: list[str]) -> list[int]:
        wanted = ", ".join(f"'{t}'" for t in [PUBLIC_TAG, *tags])
        found = (
            table.search(vector.tolist())
            .where(f"tenant = '{TENANT}' AND array_has_any(tags, [{wanted}])", prefilter=True)
            .select(["row"])
            .limit(K)
            .to_list()
        )
        return [int(hit["row"]) for hit in found]

    return build, search


def _chroma(data: _Data, workdir: Path) -> tuple[float, Any]:
    import chromadb

    t0 = time.perf_counter()
    client = chromadb.PersistentClient(path=str(workdir / "chroma"))
    collection = client.create_collection("chunks", metadata={"hnsw:space": "cosine"})
    batch = 5000
    for start in range(0, len(data.chunks), batch):
        rows = range(start, min(start + batch, len(data.chunks)))
        collection.add(
            ids=[str(i) for i in rows],
            embeddings=data.vectors[start : rows.stop],
            metadatas=[
                {"tenant": data.chunks[i]["tenant"], **{f"tag_{t}": True for t in data.chunks[i]["tags"]}} for i in rows
            ],
        )
    build = time.perf_counter() - t0

    def search(vector: np.ndarray, tags: list[str]) -> list[int]:
        either = [{f"tag_{t}": True} for t in [PUBLIC_TAG, *tags]]
        tag_rule = either[0] if len(either) == 1 else {"$or": either}
        found = collection.query(
            query_embeddings=[vector], n_results=K, where={"$and": [{"tenant": TENANT}, tag_rule]}, include=[]
        )
        return [int(i) for i in found["ids"][0]]

    return build, search


_BUILDERS = {"numpy": _numpy, "ragchat": _ragchat, "lancedb": _lancedb, "chroma": _chroma}
_MODULES = {"lancedb": "lancedb", "chroma": "chromadb"}


def run_system(system: str, directory: Path) -> dict[str, Any]:
    """One system in this process: load, build, search every query; figures as a dict."""
    data = _Data(directory)
    _, exact = _numpy(data, directory)
    workdir = Path(tempfile.mkdtemp(prefix=f"ragchat-peer-{system}-", dir=directory))
    before = process_rss_mb(os.getpid()) or 0.0
    build, search = _BUILDERS[system](data, workdir)
    for i in range(min(10, len(data.queries))):  # warm-up
        search(data.queries[i], data.query_tags[i])
    # Every search timed back to back, as ANN benchmarks time them; recall is computed after. With
    # the exact scan (153 MB of floats at 100k) run between two timed searches, each search found
    # the caches emptied: ragchat's p95 read 4.9-5.3 ms that way against 4.1-4.4 ms back to back.
    times, found_rows = [], []
    for vector, tags in zip(data.queries, data.query_tags, strict=True):
        t0 = time.perf_counter()
        found_rows.append(search(vector, tags))
        times.append((time.perf_counter() - t0) * 1000)
    recalls = []
    for vector, tags, rows in zip(data.queries, data.query_tags, found_rows, strict=True):
        expected = exact(vector, tags)
        if not expected:
            continue
        allowed = data.allowed(tags)
        found = [float(data.vectors[r] @ vector) for r in set(rows) if allowed[r]]
        recalls.append(tie_aware_recall(found, [float(data.vectors[r] @ vector) for r in expected]))
    return {
        "system": system,
        "chunks": len(data.chunks),
        "build_s": round(build, 2),
        "p50_ms": round(statistics.median(times), 2),
        "p95_ms": round(pct(times, 0.95), 2),
        "recall@10": round(statistics.mean(recalls), 3) if recalls else None,
        "rss_mb": round((process_rss_mb(os.getpid()) or 0.0) - before, 1),
    }


def peers_bench(
    *,
    chunks: int,
    searches: int = 200,
    systems: tuple[str, ...] = SYSTEMS,
    real: bool = False,
    runtime: str = "onnx-int8",
    cache_dir: Path | None = None,
) -> list[dict[str, Any]]:
    """Every system on the same data, each in a process of its own; a row each (skipped ones say why)."""
    import importlib.util

    directory = Path(tempfile.mkdtemp(prefix="ragchat-bench-peers-"))
    rows = []
    try:
        write_data(directory, chunks=chunks, searches=searches, real=real, runtime=runtime, cache_dir=cache_dir)
        for system in systems:
            module = _MODULES.get(system)
            if module and importlib.util.find_spec(module) is None:
                rows.append({"system": system, "chunks": chunks, "skipped": "not installed: pip install '.[peers]'"})
                continue
            try:
                row = run_bench_module("ragchat.bench.peers", system, str(directory), timeout=3600)
            except RuntimeError as e:
                rows.append({"system": system, "chunks": chunks, "skipped": f"failed: {str(e)[:200]}"})
                continue
            rows.append({**row, "vectors": "real" if real else "hashing"})
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return rows


if __name__ == "__main__":
    print(json.dumps(run_system(sys.argv[1], Path(sys.argv[2]))))
