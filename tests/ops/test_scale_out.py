"""Scale-out proof: two daphne processes share PostgreSQL and the Redis channel layer. The asker's
websocket is held by process A, which also answers the chat turn (A alone opens a vector store: the
embedded one, since there is no Qdrant server here: A is its holder, B a client); the owner answers
through process B, whose request never touches a vector store; the answer reaches the asker's socket on A through Redis.

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

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
ANSWER = "Contractors get no paid parking; ask facilities for a day pass. ref-" + uuid.uuid4().hex[:8]


@pytest.fixture
def holder_and_client(tmp_path, scratch_postgres, ollama_server):
    """Processes A and B (not started: A may be set up first), on a fresh PostgreSQL database (not
    the test run's own) and Redis under a prefix of their own. A holds the embedded store; B is its
    client (it never opens a store: ragchat/processes.py). Both stopped at the end."""
    redis = pytest.importorskip("redis")
    database = scratch_postgres("ragchat_scaleout")
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except Exception as e:
        pytest.skip(f"Redis not reachable at {REDIS_URL}: {e}")
    ollama_server.reset()
    shared = {
        "DATABASE_URL": database,
        "REDIS_URL": REDIS_URL,
        "CHANNELS_PREFIX": f"ragchat-scaleout-{uuid.uuid4().hex[:8]}",
    }
    a, b = (
        LiveServer(
            data_dir=tmp_path / name, ollama_url=ollama_server.url, extra_env={**shared, "RAGCHAT_STORE_ROLE": role}
        )
        for name, role in (("a", "holder"), ("b", "client"))
    )
    a.data_dir.mkdir()
    b.data_dir.mkdir()
    yield a, b
    b.stop()
    a.stop()


def test_owner_answer_through_one_process_reaches_the_socket_held_by_the_other(holder_and_client, ollama_server):
    from websockets.sync.client import connect

    a, b = holder_and_client
    a.start()
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


WORDS = [f"w{i:03d}x" for i in range(1, 41)]
SEED = r"""
import asyncio
from ragchat import runtime
from ragchat.services.types import ChunkRecord
chunks = [ChunkRecord(document_id="5d6e7f80-1a2b-4c3d-8e9f-0a1b2c3d4e5f", chunk_index=0, document_name="Parking.pdf",
    section="Parking", tags=("public",),
    chunk_text="Parking rules: employees park in garage B; visitors get a day pass at the front desk.")]
async def index():
    service = await runtime.ready_vector_service()
    await service.upsert_chunks(chunks)
asyncio.run(index())
runtime.reset()
"""


def test_turn_asked_on_a_client_runs_on_the_holder_and_survives_the_client_dying(holder_and_client, ollama_server):
    """The asker's tab is on client B: B hands the turn to holder A through Redis; the tokens reach
    B's socket and a second tab of the session on A; that tab's question meanwhile is refused as
    busy (the turn runs in another process); B is killed mid-answer, the tab reconnects to A and
    gets the rest: every token once, one stored answer. B never opened a vector store."""
    from websockets.sync.client import connect

    a, b = holder_and_client
    ollama_server.reply(" ".join(WORDS))
    ollama_server.rating(4)
    ollama_server.token_delay(0.1)  # 40 tokens over about 4 s: time to kill B mid-answer
    a.manage("migrate", "-v0")
    a.shell(SEED)  # A's embedded store holds the document the question is answered from
    a.start()
    b.start()
    a.create_user("erin", "pw-erin-123")
    asker = httpx.Client(base_url=b.url, timeout=30)
    sign_in(asker, "erin", "pw-erin-123")
    made = asker.post(
        "/chat/new/",
        data={"question": "What are the parking rules?", "csrfmiddlewaretoken": csrf(asker, "/")},
    )
    assert made.status_code == 302
    session_id = re.search(r"/chat/([0-9a-f-]{36})/", made.headers["location"]).group(1)
    cookie = {"Cookie": "; ".join(f"{k}={v}" for k, v in asker.cookies.items())}
    on_a = a.url.replace("http://", "ws://") + f"/ws/chat/{session_id}/"
    on_b = b.url.replace("http://", "ws://") + f"/ws/chat/{session_id}/?start=1"
    with connect(on_a, additional_headers={**cookie, "Origin": a.url}, open_timeout=10) as other_tab:
        with connect(on_b, additional_headers={**cookie, "Origin": b.url}, open_timeout=10) as tab:
            frames = _until(tab, lambda f: "w005x" in f)
            draft_id = re.search(r'id="m(\d+)" class="msg msg-assistant', "".join(frames)).group(1)
            other_tab.send('{"question": "And for visitors?"}')
            assert "Please wait until the current answer is finished." in "".join(
                _until(other_tab, lambda f: "Please wait" in f)
            )
            b.process.kill()  # SIGKILL mid-answer: B's socket drops, the turn runs on in A
            b.process.wait(timeout=10)
        # The page reconnects (through the load balancer: here straight to A) and syncs its draft.
        with connect(
            on_a + f"?sync={draft_id}",
            additional_headers={**cookie, "Origin": a.url},
            open_timeout=10,
        ) as tab:
            frames = _until(tab, lambda f: 'data-status="complete"' in f, timeout=30)
    shown = re.sub(r'data-copy="[^"]*"', "", frames[-1])
    assert [w for w in re.findall(r"w\d{3}x", shown)] == WORDS  # every token, once, in order
    stored = a.shell(
        "from chat.models import Message\n"
        f"answers = Message.objects.filter(session_id='{session_id}', role='assistant')\n"
        "print('ANSWERS', [(m.status, m.content.split().count('w020x')) for m in answers])\n"
        f"print('QUESTIONS', Message.objects.filter(session_id='{session_id}', role='user').count())"
    )
    assert "ANSWERS [('complete', 1)]" in stored
    assert "QUESTIONS 1" in stored  # the busy tab's question was not stored
    assert not (b.data_dir / "qdrant").exists()  # B never opened a vector store
    assert "Traceback" not in a.log_text()
