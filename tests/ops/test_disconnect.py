"""A client disconnecting mid-stream from a real daphne server: the answer still completes and is
stored whole (tests/chat proves it through channels' test communicator; this goes through daphne,
which cancels a consumer after its socket closes — the turn must not belong to the consumer)."""

from __future__ import annotations

import re
import sqlite3
import time

import httpx

from tests.browser.conftest import LiveServer
from tests.ops.test_restart import csrf, sign_in, wait_for

ANSWER = " ".join(f"piece{i}" for i in range(120))


def test_answer_completes_and_is_stored_after_the_client_disconnects(tmp_path, ollama_server):
    from websockets.sync.client import connect

    ollama_server.reset()
    server = LiveServer(data_dir=tmp_path, ollama_url=ollama_server.url).start()
    try:
        server.create_user("erin", "pw-erin-123", superuser=True)
        server.create_tag("public", "Public")
        tag_id = re.search(
            r"TAG (\d+)",
            server.shell("from documents.models import Tag\nprint('TAG', Tag.objects.get(slug='public').pk)"),
        ).group(1)
        client = httpx.Client(base_url=server.url, timeout=30)
        sign_in(client, "erin", "pw-erin-123")
        rules = b"Parking rules for visitors: visitors park on level 2 of the garage with a day pass from reception."
        client.post(
            "/documents/upload",
            data={"tags": tag_id, "csrfmiddlewaretoken": csrf(client, "/documents/")},
            files=[("files", ("parking.txt", rules, "text/plain"))],
        )
        wait_for(lambda: _status(tmp_path / "db.sqlite3") == "ready", timeout=30, what="the document indexed")
        ollama_server.reply(ANSWER)
        ollama_server.token_delay(0.02)  # about 5 s of streaming
        # A new chat begins with its first question; the page's socket (?start=1) starts the answer.
        made = client.post(
            "/chat/new/",
            data={"question": "What are the parking rules for visitors?", "csrfmiddlewaretoken": csrf(client, "/")},
        )
        session_id = re.search(r"/chat/([0-9a-f-]{36})/", made.headers["location"]).group(1)
        cookie = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
        url = server.url.replace("http://", "ws://") + f"/ws/chat/{session_id}/?start=1"
        with connect(url, additional_headers={"Cookie": cookie, "Origin": server.url}) as socket:
            deadline = time.monotonic() + 20
            while "piece3" not in socket.recv(timeout=max(0.1, deadline - time.monotonic())):
                pass
        started = time.monotonic()  # the socket is closed here, mid-answer

        db = tmp_path / "db.sqlite3"

        def assistant():
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10) as conn:
                return conn.execute(
                    "select status, content from chat_message where role='assistant' order by id desc limit 1"
                ).fetchone()

        status, content = assistant()
        assert status == "streaming" and ANSWER not in content  # it really was cut mid-stream
        status, content = wait_for(
            lambda: (row := assistant()) and row[0] != "streaming" and row, timeout=40, what="the answer to finish"
        )
        assert status == "complete" and content == ANSWER
        assert time.monotonic() - started > 1  # it kept streaming after the client left
        assert "Traceback" not in server.log_text()
    finally:
        server.stop()
        ollama_server.reset()


def _status(db) -> str | None:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10) as conn:
        row = conn.execute("select status from documents_document").fetchone()
    return row[0] if row else None
