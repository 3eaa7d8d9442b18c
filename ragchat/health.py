"""The health of a process's parts (database, vector store, embedder, model server, reranker), checked
once per call and reported by `/health` and `/api/v1/health` (ragchat.views, api.views).

The spec's enhanced health (docs/specs/rag-standard-v1.md "GET /health (enhanced)") adds `rag_ok`,
`rag_details` and `index_metrics`: `spec_fields()` derives them from the same report.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection

from ragchat import runtime


def _database_health() -> dict:
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return {"ok": True, "vendor": connection.vendor, "latency_ms": round((time.perf_counter() - started) * 1000, 2)}


async def _part(check):
    try:
        return await check()
    except Exception as e:  # a health probe reports every failure instead of raising
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


async def _vector_health() -> dict:
    service = await runtime.ready_vector_service()
    stats = await service.stats()
    return {"ok": True, **stats}


async def _embedder_health() -> dict:
    embedder = runtime.embedder()
    started = time.perf_counter()
    vector = await embedder.embed_query("health check")
    return {
        "ok": len(vector) == embedder.dimension,
        "model": embedder.model_name,
        "dimension": embedder.dimension,
        "latency_ms": round((time.perf_counter() - started) * 1000, 2),
    }


async def _llm_health() -> dict:
    # Never raises; "ok" = reachable with the models required. It also shows the provider and the
    # allowlist with each model's limits (RAG_MODELS), for admins.
    return await runtime.llm().health()


@dataclass(frozen=True)
class HealthReport:
    status: str  # ok / degraded / down
    up: bool  # every required part is up (200, else 503)
    parts: dict[str, Any]  # database, vector_store, embedder, llm, [cross_encoder]


async def health_report() -> HealthReport:
    database = await _part(sync_to_async(_database_health))
    vector_store = await _part(_vector_health)
    embedder = await _part(_embedder_health)
    llm = await _part(_llm_health)
    required = [database, vector_store, embedder] + ([llm] if settings.RAGCHAT_REQUIRE_OLLAMA else [])
    up = all(part["ok"] for part in required)
    status = "ok" if up and llm["ok"] else ("degraded" if up else "down")
    parts: dict[str, Any] = {
        "database": database,
        "vector_store": vector_store,
        "embedder": embedder,
        "llm": {**llm, "counts_for_status": settings.RAGCHAT_REQUIRE_OLLAMA},
    }
    reranker = runtime.reranker()
    if reranker is not None:  # only when configured, as docs/specs/rag-providers-spec.md's health check does
        parts["cross_encoder"] = reranker.status()
    return HealthReport(status=status, up=up, parts=parts)


def spec_fields(report: HealthReport, *, detailed: bool) -> dict[str, Any]:
    """rag_ok, rag_details, index_metrics: retrieval works (store and embedder up). Counts and
    dimensions only when `detailed` (admins), like the parts of /health."""
    store, embedder = report.parts["vector_store"], report.parts["embedder"]
    rag_ok = bool(store["ok"] and embedder["ok"])
    if not detailed:
        return {"rag_ok": rag_ok, "rag_details": "Index loaded" if rag_ok else "Search index unavailable"}
    if not rag_ok:
        failed = store if not store["ok"] else embedder
        return {"rag_ok": False, "rag_details": failed.get("error", "Search index unavailable"), "index_metrics": None}
    return {
        "rag_ok": True,
        "rag_details": (
            f"Index loaded: {store['points']} chunks, {store['documents']} documents "
            f"({store['backend']}, {store['embedding_model']})"
        ),
        "index_metrics": {
            "total_chunks": store["points"],
            "total_vectors": store["points"],
            "total_documents": store["documents"],
            "dimension": store["dimension"],
        },
    }
