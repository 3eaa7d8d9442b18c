"""An idle chat tab on the Redis channel layer, through a real daphne: its socket stays open past
the layer's blocking pops and still gets a group message.

channels_redis waits for a tab's next message in 5 s blocking pops; redis-py 8 reads with a 5 s
socket timeout by default, so the read raced the pop and daphne closed idle sockets with 1011
(settings.CHANNEL_LAYERS says how the layer reads instead). On SQLite and on PostgreSQL (a scratch
database on TEST_POSTGRES_URL's server); after the idle time the tab still asks and gets its answer
(the server's database connections idled as long). Skipped when Redis or PostgreSQL is not reachable
(TEST_REDIS_URL, TEST_POSTGRES_URL as in .ci/test.sh).

The idle time is TEST_IDLE_SECONDS (default 13 s); the ten minutes a page must stay connected:

    TEST_IDLE_SECONDS=600 .venv/bin/pytest tests/ops/test_redis_idle.py -k postgresql
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import uuid

import httpx
import pytest

from chat.services import session_group_name
from ragchat.bench.chat_load import FINAL_RE
from tests.browser.conftest import LiveServer
from tests.ops.test_restart import csrf, sign_in

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
# Two and a half of the layer's 5 s pops by default: a read timeout of 5 s loses one of them.
IDLE_SECONDS = float(os.environ.get("TEST_IDLE_SECONDS", "13"))


@pytest.fixture(params=["sqlite", "postgresql"])
def redis_server(request, tmp_path, ollama_server, scratch_postgres):
    redis = pytest.importorskip("redis")
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except Exception as e:
        pytest.skip(f"Redis not reachable at {REDIS_URL} (set TEST_REDIS_URL): {e}")
    prefix = f"ragchat-idle-{uuid.uuid4().hex[:8]}"
    database = {}
    if request.param == "postgresql":
        database = {"DATABASE_URL": scratch_postgres("ragchat_idle")}
    server = LiveServer(
        data_dir=tmp_path,
        ollama_url=ollama_server.url,
        extra_env={"REDIS_URL": REDIS_URL, "CHANNELS_PREFIX": prefix, "RAGCHAT_STORE_ROLE": "holder", **database},
    )
    yield server.start(), prefix
    server.stop()


def group_send(prefix: str, session_id: str, html: str) -> None:
    """A message to the chat's group from another process, as a turn running elsewhere sends one."""
    from channels_redis.core import RedisChannelLayer

    async def send() -> None:
        layer = RedisChannelLayer(hosts=[REDIS_URL], prefix=prefix)
        try:
            await layer.group_send(session_group_name(session_id), {"type": "chat.fragment", "html": html})
        finally:
            await layer.close_pools()

    asyncio.run(send())


@pytest.mark.timeout(IDLE_SECONDS + 240)
def test_an_idle_tab_on_redis_stays_open_and_still_gets_group_messages(redis_server):
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    server, prefix = redis_server
    server.create_user("erin", "pw-erin-123")
    client = httpx.Client(base_url=server.url, timeout=30)
    sign_in(client, "erin", "pw-erin-123")
    made = client.post(
        "/chat/new/", data={"question": "Where do visitors park?", "csrfmiddlewaretoken": csrf(client, "/")}
    )
    assert made.status_code == 302, made.text[:300]
    session_id = re.search(r"/chat/([0-9a-f-]{36})/", made.headers["location"]).group(1)
    cookie = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
    # Without ?start the question waits: nothing is sent on this socket until the group message.
    url = server.url.replace("http://", "ws://") + f"/ws/chat/{session_id}/"
    with connect(url, additional_headers={"Cookie": cookie, "Origin": server.url}) as socket:
        started = time.monotonic()
        try:
            frame = socket.recv(timeout=IDLE_SECONDS)
        except TimeoutError:
            pass  # idle, and still open
        except ConnectionClosed as e:
            pytest.fail(f"the idle socket was closed after {time.monotonic() - started:.1f} s: {e}")
        else:
            pytest.fail(f"an idle tab got a frame: {frame[:200]}")
        marker = f"idle-{uuid.uuid4().hex[:8]}"
        group_send(prefix, session_id, f'<div id="{marker}" hx-swap-oob="true"></div>')
        assert marker in socket.recv(timeout=10)
        idled = time.monotonic() - started
        # The idle tab asks: its question is stored and answered (the database connections idled too).
        socket.send(json.dumps({"question": "Where do visitors park their cars?"}))
        frames = []
        while not (frames and FINAL_RE.search(frames[-1])):
            frames.append(socket.recv(timeout=60))
        assert 'data-status="complete"' in frames[-1], frames[-1][:500]
    print(f"idle {idled:.0f} s on {server.env['DATABASE_URL'].split(':', 1)[0]} + Redis: no disconnect")
    assert "Traceback" not in server.log_text()
