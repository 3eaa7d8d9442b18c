"""Scale-out proof: two daphne processes share PostgreSQL and the Redis channel layer. The asker's
websocket is held by process A, which also answers the chat turn (A alone opens a vector store: the
embedded one, since there is no Qdrant server here); the owner answers through process B, whose
request never touches a vector store; the answer reaches the asker's socket on A through Redis.

Skipped when PostgreSQL or Redis is not reachable (TEST_POSTGRES_URL, TEST_REDIS_URL as in
.ci/test.sh).
"""

from __future__ import annotations

import os
import re
import time
import uuid

import httpx
import pytest

from tests.browser.conftest import LiveServer
from tests.ops.test_restart import csrf, sign_in

PG_URL = os.environ.get("TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/ragchat")
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
ANSWER = "Contractors get no paid parking; ask facilities for a day pass. ref-" + uuid.uuid4().hex[:8]


def _server_url(database: str) -> str:
    return PG_URL.rsplit("/", 1)[0] + "/" + database


@pytest.fixture
def scratch_database():
    """A fresh PostgreSQL database for the two servers (not the test run's own database)."""
    psycopg = pytest.importorskip("psycopg")
    redis = pytest.importorskip("redis")
    try:
        admin = psycopg.connect(_server_url("postgres"), autocommit=True, connect_timeout=3)
    except Exception as e:
        pytest.skip(f"PostgreSQL not reachable at {PG_URL}: {e}")
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except Exception as e:
        admin.close()
        pytest.skip(f"Redis not reachable at {REDIS_URL}: {e}")
    name = f"ragchat_scaleout_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    yield _server_url(name)
    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.close()


def test_owner_answer_through_one_process_reaches_the_socket_held_by_the_other(
    tmp_path, scratch_database, ollama_server
):
    from websockets.sync.client import connect

    ollama_server.reset()
    shared = {
        "DATABASE_URL": scratch_database,
        "REDIS_URL": REDIS_URL,
        "CHANNELS_PREFIX": f"ragchat-scaleout-{uuid.uuid4().hex[:8]}",
    }
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = LiveServer(data_dir=tmp_path / "a", ollama_url=ollama_server.url, extra_env=shared)
    b = LiveServer(data_dir=tmp_path / "b", ollama_url=ollama_server.url, extra_env=shared)
    a.start()
    try:
        b.start()
        a.create_user("erin", "pw-erin-123")
        a.create_user("root", "pw-root-123", superuser=True)  # answers questions with no tag owner
        asker = httpx.Client(base_url=a.url, timeout=30)
        sign_in(asker, "erin", "pw-erin-123")
        # The turn runs on A (fake Ollama, A's embedded store).
        ollama_server.reply("I do not know the parking rules for contractors.")
        ollama_server.rating(0)
        made = asker.post(
            "/chat/new/",
            data={
                "question": "Do contractors get paid parking at the office?",
                "csrfmiddlewaretoken": csrf(asker, "/"),
            },
        )
        assert made.status_code == 302
        session_id = re.search(r"/chat/([0-9a-f-]{36})/", made.headers["location"]).group(1)
        cookie = "; ".join(f"{k}={v}" for k, v in asker.cookies.items())
        ws_url = a.url.replace("http://", "ws://") + f"/ws/chat/{session_id}/?start=1"
        with connect(ws_url, additional_headers={"Cookie": cookie, "Origin": a.url}, open_timeout=10) as socket:
            frames = _until(socket, lambda f: "msg msg-assistant status-" in f and "status-streaming" not in f)
            assert "status-complete" in frames[-1]
            answer_id = re.search(r'id="m(\d+)"', frames[-1]).group(1)
            escalated = asker.post(
                f"/routing/escalate/{answer_id}/", data={"csrfmiddlewaretoken": csrf(asker, f"/chat/{session_id}/")}
            )
            assert escalated.status_code in (200, 302), escalated.text[:500]
            question_id = re.search(
                r"QID (\d+)",
                a.shell(
                    "from routing.models import RoutedQuestion\n"
                    f"print('QID', RoutedQuestion.objects.get(message_id={answer_id}).pk)"
                ),
            ).group(1)

            # The owner answers through B.
            owner = httpx.Client(base_url=b.url, timeout=30)
            sign_in(owner, "root", "pw-root-123")
            token = csrf(owner, f"/routing/q/{question_id}/")
            posted = owner.post(f"/routing/q/{question_id}/", data={"answer": ANSWER, "csrfmiddlewaretoken": token})
            assert posted.status_code == 302, posted.text[:1000]

            # ... and it reaches the asker's socket on A.
            frames = _until(socket, lambda f: ANSWER in f, timeout=15)
            assert "msg-owner" in frames[-1]
        stored = a.shell(
            "from chat.models import Message\n"
            f"print('OWNER', Message.objects.filter(session_id='{session_id}', role='owner').values_list('content', flat=True)[0])"
        )
        assert f"OWNER {ANSWER}" in stored
        assert "Traceback" not in a.log_text() + b.log_text()
    finally:
        b.stop()
        a.stop()


def _until(socket, predicate, *, timeout: float = 20) -> list[str]:
    frames: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            frame = socket.recv(timeout=max(0.1, deadline - time.monotonic()))
        except TimeoutError:
            break
        frames.append(frame)
        if predicate(frame):
            return frames
    raise AssertionError(f"no matching frame in {timeout} s; got {[f[:120] for f in frames]}")
