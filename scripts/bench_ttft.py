"""The app's own share of time-to-first-token: from the moment the chat websocket receives a question
to the moment the first token frame leaves the consumer, with a zero-latency model (the fake Ollama
server, no first-token delay) over an embedded index of N chunks (default 10,000, hashing embedder).

What it includes: validation, storing the question, the draft, tags and history lookups, the query
strategy, model validation (cached tag list), embedding the query, the vector search, the budget,
the prompt, the HTTP round trip to the (instant) model, rendering and sending the first frame.

Usage: .venv/bin/python scripts/bench_ttft.py [--chunks 10000] [--questions 60]
Runs in a temporary directory (own SQLite, own embedded Qdrant); prints p50/p95/max in ms.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORDS = (
    "vacation leave policy expense travel meal receipt contract contractor employee manager approval "
    "portal request payroll salary bonus pension insurance health dental laptop security password vpn "
    "office remote hybrid onboarding training budget invoice supplier purchase order compliance audit "
    "privacy data retention incident report holiday sick parental overtime shift schedule badge parking"
).split()


def chunk_text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(60, 140))) + "."


def question(rng: random.Random) -> str:
    return "What does the " + " ".join(rng.choice(WORDS) for _ in range(4)) + " policy say?"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


async def run(args: argparse.Namespace) -> dict:
    from asgiref.sync import sync_to_async
    from channels.routing import URLRouter
    from channels.testing import WebsocketCommunicator

    from chat import turns
    from chat.models import ChatSession
    from ragchat import runtime
    from ragchat.models import User
    from ragchat.services.types import ChunkRecord
    from ragchat.ws_urls import websocket_urlpatterns

    rng = random.Random(7)
    service = await runtime.ready_vector_service()
    started = time.perf_counter()
    doc_ids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(args.chunks // 20 + 1)]
    batch: list[ChunkRecord] = []
    for i in range(args.chunks):
        doc = doc_ids[i // 20]
        batch.append(ChunkRecord(document_id=doc, chunk_index=i % 20, document_name=f"Doc {i // 20}.pdf",
                                 chunk_text=chunk_text(rng), tags=("public",), page_number=1 + i % 20))
        if len(batch) == 500:
            await service.upsert_chunks(batch)
            batch = []
    if batch:
        await service.upsert_chunks(batch)
    index_s = time.perf_counter() - started

    user = await sync_to_async(User.objects.create_user)(username=f"bench-{uuid.uuid4().hex[:6]}", password="x")
    app = URLRouter(websocket_urlpatterns)
    samples: list[float] = []
    for i in range(args.warmup + args.questions):
        session = await sync_to_async(ChatSession.objects.create)(owner=user)
        comm = WebsocketCommunicator(app, f"/ws/chat/{session.pk}/")
        comm.scope["user"] = user
        connected, _ = await comm.connect()
        assert connected
        t0 = time.perf_counter()
        await comm.send_to(text_data=json.dumps({"question": question(rng)}))
        while True:
            frame = await comm.receive_from(timeout=30)
            if 'hx-swap-oob="innerHTML"' in frame:
                break
        elapsed = (time.perf_counter() - t0) * 1000
        await turns.wait_idle()
        await comm.disconnect()
        if i >= args.warmup:
            samples.append(elapsed)
    return {
        "chunks": args.chunks,
        "index_seconds": round(index_s, 1),
        "questions": len(samples),
        "ttft_ms_p50": round(percentile(samples, 0.50), 1),
        "ttft_ms_p95": round(percentile(samples, 0.95), 1),
        "ttft_ms_mean": round(statistics.mean(samples), 1),
        "ttft_ms_max": round(max(samples), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()

    from tests.fakes.ollama_server import FakeOllama

    fake = FakeOllama().start()
    fake.reply("The policy says so [SourceId: 00000000-0000-4000-8000-000000000000:0].")
    tmp = Path(tempfile.mkdtemp(prefix="ragchat-bench-ttft-"))
    os.environ.update({
        "DJANGO_SETTINGS_MODULE": "ragchat.settings",
        "RAGCHAT_DATA_DIR": str(tmp),
        "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
        "QDRANT_PATH": str(tmp / "qdrant"),
        "EMBEDDING_BACKEND": "hashing",
        "EMBEDDING_MODEL": "hashing-384",
        "OLLAMA_BASE_URL": fake.url,
        "REDIS_URL": "",
        "LOG_LEVEL": "WARNING",
    })
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    try:
        result = asyncio.run(run(args))
    finally:
        fake.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
