"""The server process killed (SIGKILL) mid-ingestion, then restarted: every document ends ready or
failed-and-retryable, never half indexed (documents/recovery.py runs on the restarted server's first
request). Real daphne subprocesses on a file SQLite database and an embedded Qdrant; the fake Ollama
serves embeddings slowly enough that the kill lands between two batches."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import time
import uuid
from pathlib import Path

import httpx

from documents.recovery import INTERRUPTED_MESSAGE
from ragchat.evaluation.docgen import lorem_sentences, make_text
from tests.browser.conftest import LiveServer
from tests.ops.conftest import slow_ingestion_server

CSRF_RE = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def csrf(client: httpx.Client, path: str) -> str:
    page = client.get(path)
    assert page.status_code == 200, (path, page.status_code)
    return CSRF_RE.search(page.text).group(1)


def sign_in(client: httpx.Client, username: str, password: str) -> None:
    token = csrf(client, "/accounts/login/")
    done = client.post(
        "/accounts/login/", data={"username": username, "password": password, "csrfmiddlewaretoken": token}
    )
    assert done.status_code == 302, done.text[:500]


def documents(db: Path) -> dict[str, dict]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute("select id, original_filename, status, stage, error, chunk_count from documents_document")
        return {r["original_filename"]: dict(r) for r in rows}


def indexed(row: dict | None) -> int:
    """Chunks stored so far, from the stage ingestion reports after each batch ("Indexed 8 of 61 chunks")."""
    match = re.match(r"Indexed (\d+) of", (row or {}).get("stage") or "")
    return int(match.group(1)) if match else 0


def wait_for(predicate, *, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def stored_vectors(server: LiveServer, document_id: str) -> int:
    """Count a document's chunks in the embedded store (the server must be stopped: one process only)."""
    out = server.shell(
        "from asgiref.sync import async_to_sync\nfrom ragchat import runtime\n"
        "async def c():\n"
        f"    return await (await runtime.ready_vector_service()).count(document_id={str(document_id)!r})\n"
        "print('COUNT', async_to_sync(c)())\nruntime.reset()"
    )
    return int(re.search(r"COUNT (\d+)", out).group(1))


def kill(server: LiveServer) -> None:
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=10)
    server.process = None
    server.stop()  # closes the log file


def test_server_killed_mid_ingestion_then_restarted(tmp_path, slow_embeddings):
    server = slow_ingestion_server(tmp_path, slow_embeddings, {"RAGCHAT_INGEST_CONCURRENCY": "1"})
    db = tmp_path / "db.sqlite3"
    server.start()
    try:
        server.create_user("root", "pw-root-123", superuser=True)
        server.create_tag("finance", "Finance", owner="root")
        tag_id = re.search(
            r"TAG (\d+)",
            server.shell("from documents.models import Tag\nprint('TAG', Tag.objects.get(slug='finance').pk)"),
        ).group(1)
        client = httpx.Client(base_url=server.url, timeout=30)
        sign_in(client, "root", "pw-root-123")
        token = csrf(client, "/documents/")
        files = [
            ("files", ("long.txt", make_text(lorem_sentences(200, seed=11)), "text/plain")),
            ("files", ("waiting.txt", make_text(lorem_sentences(20, seed=12)), "text/plain")),
        ]
        done = client.post("/documents/upload", data={"tags": tag_id, "csrfmiddlewaretoken": token}, files=files)
        assert done.status_code == 302, done.text[:500]

        # Kill -9 while "long.txt" is between batches and "waiting.txt" waits its turn.
        wait_for(lambda: 8 <= indexed(documents(db).get("long.txt")) < 40, timeout=60, what="a few batches of long.txt")
        kill(server)
        before = documents(db)
        assert before["long.txt"]["status"] == "processing" and before["waiting.txt"]["status"] == "queued"
        long_id, waiting_id = (str(uuid.UUID(before[name]["id"])) for name in ("long.txt", "waiting.txt"))
        assert stored_vectors(server, long_id) >= 8  # half indexed on disk: what recovery must undo

        # Restart: the first request runs the recovery; the queued document is started again.
        slow_embeddings.first_token_delay(0)
        server.start()
        after = wait_for(
            lambda: (d := documents(db)) and d["waiting.txt"]["status"] == "ready" and d,
            timeout=60,
            what="waiting.txt indexed after the restart",
        )
        assert after["long.txt"]["status"] == "failed"
        assert after["long.txt"]["error"] == INTERRUPTED_MESSAGE and after["long.txt"]["chunk_count"] == 0
        server.stop()
        assert stored_vectors(server, long_id) == 0
        assert stored_vectors(server, waiting_id) == after["waiting.txt"]["chunk_count"] > 0

        # Retry (one click on the document's row): it is indexed whole.
        server.start()
        sign_in(client, "root", "pw-root-123")
        token = csrf(client, "/documents/")
        done = client.post(f"/documents/{long_id}/retry", data={"csrfmiddlewaretoken": token})
        assert done.status_code == 302
        final = wait_for(
            lambda: (d := documents(db)["long.txt"]) and d["status"] == "ready" and d,
            timeout=60,
            what="long.txt indexed on retry",
        )
        server.stop()
        assert stored_vectors(server, long_id) == final["chunk_count"] > 8
    finally:
        if server.process is not None:
            server.stop()
