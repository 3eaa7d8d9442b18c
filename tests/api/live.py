"""What the tests of a live daphne process share: a server seeded with people, API tokens and a signed-in
browser session; an API client of one of them; a document uploaded through the API and waited for;
a question asked over the chat websocket; server-sent events read."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

import httpx

from tests.browser.conftest import LiveServer

# The assistant message's frame that ends a turn over the chat websocket.
FINAL_RE = re.compile(r'data-role="assistant" data-status="(complete|interrupted|failed)"')


def seeded_api_server(data_dir, *, ollama_url: str, setup: str, extra_env: dict[str, str]) -> LiveServer:
    """A started server whose `setup` shell script printed, on its last line, JSON with `tokens`
    (who → API token) and `cookie` (a session cookie): both kept on the server."""
    server = LiveServer(data_dir=data_dir, ollama_url=ollama_url, extra_env=extra_env)
    server.manage("migrate", "-v0")
    seeded = json.loads(server.shell(setup).strip().splitlines()[-1])
    server.start()
    server.tokens = seeded["tokens"]
    server.cookie = seeded["cookie"]
    return server


def client(server, who: str | None, *, timeout: float = 30) -> httpx.Client:
    """The API as `who` (their token), or anonymous."""
    headers = {"Authorization": f"Bearer {server.tokens[who]}"} if who else {}
    return httpx.Client(base_url=server.url + "/api/v1", headers=headers, timeout=timeout)


def upload(api: httpx.Client, name: str, text: str, tags: list[str], *, timeout: float = 60) -> dict:
    """A text document uploaded through the API and indexed: its JSON once "ready"."""
    created = api.post("/documents", files=[("files", (name, text.encode(), "text/plain"))], data={"tags": tags})
    assert created.status_code == 201, created.text
    [doc] = created.json()["created"]
    assert doc["tags"] == tags and doc["status"] in ("queued", "processing", "ready"), doc
    deadline = time.monotonic() + timeout
    while doc["status"] != "ready":
        assert doc["status"] != "failed" and time.monotonic() < deadline, doc
        time.sleep(0.2)
        doc = api.get(f"/documents/{doc['id']}").json()
    return doc


async def ask_websocket(
    server, session_id: str, question: str, *, on_frame: Callable[[str], None] | None = None
) -> tuple[str, str, float]:
    """`question` asked in the session over the chat websocket, with the server's session cookie:
    (the final frame, its status, milliseconds from sending the question to that frame). `on_frame`
    sees every frame."""
    from websockets.asyncio.client import connect

    async with connect(
        f"ws://127.0.0.1:{server.port}/ws/chat/{session_id}/",
        origin=server.url,
        additional_headers={"Cookie": f"sessionid={server.cookie}"},
        max_size=None,
        ping_interval=None,
    ) as ws:
        started = time.perf_counter()
        await ws.send(json.dumps({"question": question}))
        async for frame in ws:
            text = frame if isinstance(frame, str) else frame.decode()
            if on_frame is not None:
                on_frame(text)
            match = FINAL_RE.search(text)
            if match:
                return text, match.group(1), (time.perf_counter() - started) * 1000
    raise AssertionError("the websocket closed before the answer")


def sse_events(response) -> list[tuple[str, dict, float]]:
    """A server-sent event stream as (event, data, when it arrived)."""
    events, name, data = [], None, []
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data.append(line[6:])
        elif not line and name:
            events.append((name, json.loads("\n".join(data)), time.perf_counter()))
            name, data = None, []
    return events
