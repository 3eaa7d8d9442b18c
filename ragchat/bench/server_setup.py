"""Prepare a scratch server for the websocket benchmarks; run in the scratch environment
(RAGCHAT_DATA_DIR etc. set by the caller), never against the live database or index.

    python -m ragchat.bench.server_setup --chunks 10000 --sessions 260 --people 200
migrates the scratch SQLite database, creates a user holding the tag "bench", a signed-in session
and N chat sessions, P more people holding the tag, each signed in with no chat yet (the new-chat
burst: each starts one from the landing page), and fills the embedded Qdrant with synthetic chunks
plus a few target chunks about the benchmark question (so every question gets context and the model
is really called). Prints one JSON line: {"cookie": ..., "sessions": [...], "people": [their
session cookies], "chunks": n}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random

BENCH_TAG = "bench"
QUESTION_TOPIC = "How does the vacation approval policy work for team managers in the bench office?"


def target_texts() -> list[str]:
    return [
        f"Vacation approval policy for team managers in the bench office, part {i}: managers approve "
        "vacation requests in the portal within five working days; the policy covers team managers, "
        "their deputies and the bench office staff."
        for i in range(1, 6)
    ]


async def fill_index(chunks: int) -> int:
    from ragchat import runtime
    from ragchat.bench.common import make_chunks
    from ragchat.services.embeddings import HashingEmbedder
    from ragchat.services.types import ChunkRecord

    service = await runtime.ready_vector_service()
    rng = random.Random(10)
    records = make_chunks(chunks, rng)
    # The background chunks get hashing vectors of the same dimension: search cost depends on the
    # number and size of vectors, not on what they mean; the targets get the configured model's.
    hashing = HashingEmbedder(dimension=service.embedder.dimension)
    for start in range(0, len(records), 512):
        batch = records[start : start + 512]
        await service.upsert_chunks(batch, [hashing.embed_sync(r.chunk_text) for r in batch])
    targets = [
        ChunkRecord(
            document_id="0b0b0b0b-0000-4000-8000-00000000be0c",
            chunk_index=i,
            document_name="Bench policy",
            chunk_text=text,
            tags=(BENCH_TAG,),
            section="Vacation approval",
        )
        for i, text in enumerate(target_texts())
    ]
    await service.upsert_chunks(targets)  # embedded by the configured embedder
    await service.settle()
    total = await service.count()
    await service.close()
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=250)
    parser.add_argument("--people", type=int, default=0)
    parser.add_argument("--username", default="bench")
    parser.add_argument("--password", default="bench-password-not-secret")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ragchat.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password
    from django.core.management import call_command

    from chat.models import ChatSession
    from documents.services import tag_create

    call_command("migrate", verbosity=0)
    User = get_user_model()
    user = User.objects.create_user(args.username, password=args.password)
    # Signed in by their cookies alone: no password to hash (hashing 200 would take a minute).
    people = User.objects.bulk_create(
        User(username=f"{args.username}-person-{i}", password=make_password(None)) for i in range(args.people)
    )
    tag_create(tenant_id=user.tenant_id, name="Bench", slug=BENCH_TAG, members=[user, *people])
    sessions = ChatSession.objects.bulk_create(ChatSession(owner=user) for _ in range(args.sessions))
    total = asyncio.run(fill_index(args.chunks))
    print(
        json.dumps(
            {
                "cookie": signed_in(user),
                "sessions": [str(s.pk) for s in sessions],
                "people": [signed_in(person) for person in people],
                "chunks": total,
            }
        )
    )


def signed_in(user) -> str:
    """The key of a new Django session signed in as `user`: the cookie a browser would hold."""
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    store = SessionStore()
    store[SESSION_KEY] = str(user.pk)
    store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.create()
    return store.session_key


if __name__ == "__main__":
    main()
