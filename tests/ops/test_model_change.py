"""Upgrading to another embedding model (docs/deploying.md "Upgrading"): the store built with the old model is
refused everywhere (indexing commands, /health 503, searches) until `manage.py reindex` has
re-embedded every document into a new collection; the two models' vectors are never mixed.
Real commands and a real daphne process on a file SQLite database and the embedded store; the new
model is served by the fake Ollama through the real client."""

from __future__ import annotations

import re
from dataclasses import replace

import httpx
import pytest

from chat import turns
from chat.models import Message
from ragchat import runtime
from ragchat.evaluation.docgen import lorem_sentences, make_text
from tests.browser.conftest import LiveServer
from tests.chat.conftest import open_tab
from tests.ops.test_faults import VACATION_Q
from tests.ops.test_restart import sign_in

STATS = """
from asgiref.sync import async_to_sync
from ragchat import runtime
from documents.models import Document
async def stats():
    return await (await runtime.ready_vector_service()).stats()
s = async_to_sync(stats)()
print('STATS', s['embedding_model'], s['dimension'], s['points'], sum(d.chunk_count for d in Document.objects.filter(status='ready')))
runtime.reset()
"""


def stats(site: LiveServer) -> tuple[str, int, int, int]:
    model, dimension, points, chunks = re.search(r"STATS (\S+) (\d+) (\d+) (\d+)", site.shell(STATS)).groups()
    return model, int(dimension), int(points), int(chunks)


def health(site: LiveServer) -> tuple[int, dict]:
    client = httpx.Client(base_url=site.url, timeout=30)
    sign_in(client, "root", "pw-root-123")  # an admin sees the parts' errors
    response = client.get("/health")
    return response.status_code, response.json()


def test_embedding_model_change_is_refused_until_reindexed(tmp_path, ollama_server):
    old = LiveServer(data_dir=tmp_path, ollama_url=ollama_server.url)
    old.manage("migrate", "-v0")
    old.create_user("root", "pw-root-123", superuser=True)
    old.create_tag("finance", "Finance", owner="root")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_bytes(make_text(lorem_sentences(30, seed=1)))
    (folder / "b.txt").write_bytes(make_text(lorem_sentences(50, seed=2)))
    old.manage("ingest_folder", str(folder), "--tag", "finance")
    assert stats(old)[0] == "hashing-384"

    new = LiveServer(
        data_dir=tmp_path,
        ollama_url=ollama_server.url,
        extra_env={"EMBEDDING_BACKEND": "ollama", "EMBEDDING_MODEL": "nomic-embed-text"},
    )
    # Refused: an indexing command, and the server's /health (503, the reason named).
    refused = new.manage("settle_index", check=False)
    assert refused.returncode and "hashing-384" in refused.stderr and "manage.py reindex" in refused.stderr
    new.start()
    try:
        status, body = health(new)
        assert status == 503 and body["vector_store"]["ok"] is False
        assert (
            "nomic-embed-text" in body["vector_store"]["error"] and "manage.py reindex" in body["vector_store"]["error"]
        )
    finally:
        new.stop()
    model, dimension, points, chunks = stats(old)  # nothing written by the new model: not mixed
    assert model == "hashing-384" and points == chunks > 0

    done = new.manage("reindex", check=False)
    assert "Re-embedded 2 of 2 documents with 'nomic-embed-text'" in done.stdout, done.stdout + done.stderr
    model, dimension, points, chunks = stats(new)
    assert model == "nomic-embed-text" and points == chunks > 0
    new.start()
    try:
        status, body = health(new)
        assert status == 200 and body["vector_store"]["embedding_model"] == "nomic-embed-text", body
    finally:
        new.stop()
    # And now the old model is the one refused.
    refused = old.manage("settle_index", check=False)
    assert refused.returncode and "nomic-embed-text" in refused.stderr


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("drain_turns")
async def test_a_question_on_a_store_of_another_model_says_to_reindex(chat_session, corpus, settings, fake_ollama):
    """The chat's own words for it: not "try again" (it would fail again) but what must happen."""
    runtime.reset()
    settings.RAG = replace(settings.RAG, embedding_backend="ollama", embedding_model="nomic-embed-text")
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    await tab.ask(VACATION_Q)
    final = await tab.until_final()
    await turns.wait_idle()
    answer = await Message.objects.filter(session=chat_session, role="assistant").alast()
    assert answer.status == "failed" and answer.error == turns.MSG_REINDEX
    assert "manage.py reindex" in final
    assert fake_ollama.requests_to("/api/chat") == []  # nothing answered without the documents
    await tab.close()
