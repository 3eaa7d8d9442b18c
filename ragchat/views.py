import time

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.http import require_GET

from access import policy
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


async def _ollama_health() -> dict:
    return await runtime.llm().health()  # never raises; "ok" = reachable with the models required


@require_GET
async def health(request):
    """One JSON document: the status, and for admins each part (database, vector store, embedder,
    Ollama). 503 when a required part is down."""
    database = await _part(sync_to_async(_database_health))
    vector_store = await _part(_vector_health)
    embedder = await _part(_embedder_health)
    ollama = await _part(_ollama_health)
    required = [database, vector_store, embedder] + ([ollama] if settings.RAGCHAT_REQUIRE_OLLAMA else [])
    up = all(part["ok"] for part in required)
    status = "ok" if up and ollama["ok"] else ("degraded" if up else "down")
    body = {
        "status": status,
        "database": database,
        "vector_store": vector_store,
        "embedder": embedder,
        "ollama": {**ollama, "counts_for_status": settings.RAGCHAT_REQUIRE_OLLAMA},
    }
    reranker = runtime.reranker()
    if reranker is not None:  # only when configured, as docs/specs/rag-providers-spec.md's health check does
        body["cross_encoder"] = reranker.status()
    user = await request.auser()
    if not policy.is_admin(user):
        # Model names, counts and addresses are for admins; a probe only needs the verdict.
        body = {"status": status}
    return JsonResponse(body, status=200 if up else 503)
