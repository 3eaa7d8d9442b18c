"""Ingestion throughput: the evaluation corpus (every file of every format) through the product's own
ingestion pipeline (ragchat/services/ingestion.py), several rounds, into a scratch embedded store;
per-stage seconds come from the pipeline's timings."""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from ragchat.evaluation.corpus import write_corpus
from ragchat.evaluation.runner import EMBEDDERS, ingest_folder
from ragchat.services.config import RAGSettings
from ragchat.services.embeddings import build_embedder
from ragchat.services.ingestion import STAGES
from ragchat.services.vector_store import VectorService


async def ingest_bench(*, embedder: str, rounds: int = 3, base: RAGSettings | None = None) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="ragchat-bench-ingest-"))
    settings = replace(
        base or RAGSettings(),
        qdrant_url="",
        qdrant_path=str(workdir / "qdrant"),
        qdrant_collection="bench_ingest",
        embedding_backend=embedder,
        embedding_model=EMBEDDERS[embedder],
        embedding_cache_size=0,  # every round really embeds
    )
    folder, _ = write_corpus(workdir / "corpus")
    service = VectorService(settings, build_embedder(settings))
    try:
        await service.initialize()
        await service.embedder.embed_documents(["warm-up: load the model before the clock starts"])
        chunks = documents = 0
        stages = dict.fromkeys(STAGES, 0.0)
        started = time.perf_counter()
        for _ in range(rounds):
            index = await ingest_folder(service, folder=folder, settings=settings, intruder_twins=False)
            chunks += index.chunks
            documents += len(index.documents)
            for key, value in index.stage_seconds.items():
                stages[key] += value
        seconds = time.perf_counter() - started
    finally:
        await service.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "embedder": EMBEDDERS[embedder],
        "documents": documents,
        "chunks": chunks,
        "seconds": round(seconds, 2),
        "chunks_per_s": round(chunks / seconds, 1) if seconds else None,
        "documents_per_s": round(documents / seconds, 2) if seconds else None,
        "stage_seconds": {key: round(value, 2) for key, value in stages.items()},
    }
