"""Ingestion throughput: chunks per second for parse + chunk + embed + upsert into the embedded Qdrant.

    .venv/bin/python scripts/bench_ingest.py                 # hashing stand-in embedder and local MiniLM
    .venv/bin/python scripts/bench_ingest.py --backend hashing --docs 60

The corpus is generated (PDF, DOCX, HTML, Markdown, text; ~2-6 pages each) into memory; every run
uses a fresh temporary Qdrant directory. Same code path as the app's ingestion minus the database
bookkeeping: ragchat.services.parsing -> chunking -> embedder.embed_documents in batches ->
VectorService.upsert_chunks. Prints one line per backend and a JSON summary.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from documents.demo_corpus import _docx, _html, _pdf
from ragchat.services.chunking import chunk_document
from ragchat.services.config import RAGSettings
from ragchat.services.embeddings import build_embedder
from ragchat.services.parsing import parse_document
from ragchat.services.types import ChunkRecord
from ragchat.services.vector_service import VectorService

WORDS = ["policy", "employee", "travel", "expense", "approval", "budget", "invoice", "laptop", "security", "password", "holiday", "leave", "manager", "report", "quarterly", "contract", "supplier", "payment", "review", "training", "device", "network", "access", "customer", "order", "workshop", "process", "request", "team", "office", "schedule", "deadline", "project"]


def _paragraph(rng: random.Random, sentences: int) -> str:
    out = []
    for _ in range(sentences):
        words = [rng.choice(WORDS) for _ in range(rng.randint(8, 20))]
        out.append(" ".join(words).capitalize() + ".")
    return " ".join(out)


def corpus(count: int, seed: int = 7) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    files = []
    for i in range(count):
        sections = [(f"Section {j + 1}", [_paragraph(rng, 6) for _ in range(4)]) for j in range(rng.randint(2, 6))]
        kind = i % 5
        if kind == 0:
            files.append((f"doc{i}.pdf", _pdf(f"Document {i}", [(h, " ".join(ps)) for h, ps in sections])))
        elif kind == 1:
            files.append((f"doc{i}.docx", _docx(f"Document {i}", sections)))
        elif kind == 2:
            files.append((f"doc{i}.html", _html(f"Document {i}", sections)))
        elif kind == 3:
            md = "\n\n".join(f"## {h}\n\n" + "\n\n".join(ps) for h, ps in sections)
            files.append((f"doc{i}.md", f"# Document {i}\n\n{md}".encode()))
        else:
            files.append((f"doc{i}.txt", "\n\n".join(p for _, ps in sections for p in ps).encode()))
    return files


async def run(backend: str, files: list[tuple[str, bytes]]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        settings = replace(
            RAGSettings.from_env({}),
            embedding_backend=backend,
            embedding_model="hashing-384" if backend == "hashing" else "all-MiniLM-L6-v2",
            qdrant_path=str(Path(tmp) / "qdrant"),
            embedding_cache_size=0,
        )
        embedder = build_embedder(settings)
        service = VectorService.from_settings(settings, embedder)
        await service.initialize()
        if backend == "local":
            await embedder.embed_documents(["warm-up"])  # model load is start-up cost, not throughput
        chunks_total = 0
        stages = {"parse": 0.0, "chunk": 0.0, "embed": 0.0, "upsert": 0.0}
        started = time.perf_counter()
        for filename, data in files:
            t0 = time.perf_counter()
            parsed = await asyncio.to_thread(parse_document, data=data, filename=filename)
            t1 = time.perf_counter()
            stages["parse"] += t1 - t0
            chunks = await asyncio.to_thread(
                chunk_document, parsed=parsed, chunk_size=settings.effective_chunk_size,
                overlap=settings.chunk_overlap_tokens, count_tokens=embedder.count_tokens,
            )
            stages["chunk"] += time.perf_counter() - t1
            document_id = str(uuid.uuid4())
            records = [
                ChunkRecord(document_id=document_id, chunk_index=c.chunk_index, document_name=parsed.title,
                            chunk_text=c.text, tags=("public",), page_number=c.page_number, section=c.section,
                            token_count=c.token_count)
                for c in chunks
            ]
            for start in range(0, len(records), settings.embedding_batch_size):
                batch = records[start : start + settings.embedding_batch_size]
                t2 = time.perf_counter()
                vectors = await embedder.embed_documents([r.chunk_text for r in batch])
                t3 = time.perf_counter()
                await service.upsert_chunks(batch, vectors)
                stages["embed"] += t3 - t2
                stages["upsert"] += time.perf_counter() - t3
            chunks_total += len(records)
        elapsed = time.perf_counter() - started
        stored = await service.count()
        await service.close()
    assert stored == chunks_total, (stored, chunks_total)
    return {
        "backend": backend,
        "model": embedder.model_name,
        "chunk_size_tokens": settings.effective_chunk_size,
        "documents": len(files),
        "chunks": chunks_total,
        "seconds": round(elapsed, 2),
        "chunks_per_second": round(chunks_total / elapsed, 1),
        "documents_per_second": round(len(files) / elapsed, 2),
        "stage_seconds": {k: round(v, 2) for k, v in stages.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["hashing", "local", "both"], default="both")
    parser.add_argument("--docs", type=int, default=40)
    args = parser.parse_args()
    files = corpus(args.docs)
    backends = ["hashing", "local"] if args.backend == "both" else [args.backend]
    results = []
    for backend in backends:
        result = asyncio.run(run(backend, files))
        results.append(result)
        print(f"{result['backend']:<8} {result['model']:<18} {result['documents']} docs, {result['chunks']} chunks "
              f"(size {result['chunk_size_tokens']} tokens) in {result['seconds']} s: "
              f"{result['chunks_per_second']} chunks/s, {result['documents_per_second']} docs/s; "
              f"stages {result['stage_seconds']}")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
