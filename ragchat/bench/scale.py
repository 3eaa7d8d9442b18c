"""`manage.py bench --scale`: the multi-process cluster (ragchat/bench/cluster.py: PostgreSQL, Redis,
N daphne processes behind HAProxy, the fake Ollama) driven through real websockets:

- spread: S chat streams at once through HAProxy (round robin: the sockets land on every process);
  every token of every answer must arrive, in order (numbered tokens, as in chat_load); each
  process's CPU over the run, and from it the CPU per streamed token;
- per question: Q questions one after another with one-token answers: the processes' CPU per
  question (the model is another process, so excluded) and the database's commits and rows
  written per question (pg_stat_database of the scratch database);
- other tab: a session's tab on a client asks; its other tab, on the holder, sees every token and
  its own question meanwhile is refused as busy (the turn runs in another process);
- kill: a tab on a client process streams an answer; the process is killed (SIGKILL) mid-answer;
  the tab reconnects through HAProxy (to a live process) with the draft's id, as the page does, and
  gets the rest: every token exactly once, one stored answer;
- memory per open chat tab on a client process.

Ingestion with 1 and 2 `db_worker` processes needs a Qdrant server (a worker cannot open the
embedded store): measured only with --qdrant-url, reported as not run otherwise.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from typing import Any

from ragchat.bench.chat_load import COPY_ATTR_RE, FINAL_RE, TOKEN_RE, question
from ragchat.bench.cluster import Cluster
from ragchat.bench.common import pct, process_cpu_seconds, process_rss_mb

BUSY = "Please wait until the current answer is finished."


class Tab:
    """One open chat tab: a websocket to `port` (HAProxy's or one process's)."""

    def __init__(self, cluster: Cluster, session_id: str, port: int, query: str = "") -> None:
        self.url = f"ws://127.0.0.1:{port}/ws/chat/{session_id}/{query}"
        self.origin = f"http://127.0.0.1:{port}"
        self.cookie = cluster.cookie
        self.ws: Any = None
        self.tokens: list[int] = []  # the numbers in the latest frame that held any
        self.first_token_at: float | None = None
        self.status = ""
        self.final_tokens: list[int] = []
        self.reordered = 0
        self.frames: list[str] = []
        self.draft_id = ""
        self.reconnects = 0  # sockets the server closed, reopened as the page does

    async def __aenter__(self) -> Tab:
        await self._connect(self.url)
        return self

    async def _connect(self, url: str) -> None:
        from websockets.asyncio.client import connect

        self.ws = await connect(
            url,
            origin=self.origin,
            additional_headers={"Cookie": f"sessionid={self.cookie}"},
            max_size=None,
            open_timeout=60,
            ping_interval=None,
        )

    async def __aexit__(self, *exc) -> None:
        await self.ws.close()

    async def ask(self, qid: int, tokens: int) -> None:
        await self.ws.send(json.dumps({"question": question(qid, tokens)}))

    async def read(self, *, until, timeout: float = 120.0) -> bool:
        """Read frames until `until(frame)` is true (True) or the time is up (False). A socket the
        server closes is reopened as the page does (with the draft's id), at most three times."""
        from websockets.exceptions import ConnectionClosed

        try:
            async with asyncio.timeout(timeout):
                while True:
                    try:
                        return await self._read(until)
                    except ConnectionClosed:
                        if self.reconnects >= 3:
                            raise
                        # As the page does: reconnect, naming the draft it shows, and read on.
                        self.reconnects += 1
                        self.tokens = []
                        await self._connect(
                            self.url.split("?")[0] + (f"?sync={self.draft_id}" if self.draft_id else "")
                        )
        except TimeoutError:
            return False

    async def _read(self, until) -> bool:
        import re

        async for frame in self.ws:
            text = frame if isinstance(frame, str) else frame.decode()
            self.frames.append(text)
            if not self.draft_id:
                found = re.search(r'id="m(\d+)" class="msg msg-assistant', text)
                if found:
                    self.draft_id = found.group(1)
            numbers = [int(n) for n in TOKEN_RE.findall(COPY_ATTR_RE.sub("", text))]
            if numbers:
                if numbers != list(range(1, len(numbers) + 1)) or len(numbers) < len(self.tokens):
                    self.reordered += 1
                self.tokens = numbers
                if self.first_token_at is None:
                    self.first_token_at = time.time()
            final = FINAL_RE.search(text)
            if final:
                self.status = final.group(1)
                self.final_tokens = numbers
            if until(text):
                return True
        return False


def _cpu(cluster: Cluster) -> list[float | None]:
    return [process_cpu_seconds(pid) if pid else None for pid in cluster.pids()]


def _cpu_delta(before: list[float | None], after: list[float | None]) -> list[float | None]:
    return [round(b2 - b1, 3) if b1 is not None and b2 is not None else None for b1, b2 in zip(before, after)]


async def measure_spread(
    cluster: Cluster, *, streams: int, tokens: int, token_interval: float, first: int
) -> dict[str, Any]:
    cluster.set_fake(f"delay {token_interval}", "style markdown", "pieces token")
    tabs = [Tab(cluster, cluster.session_ids[first + i], cluster.port) for i in range(streams)]
    # Tabs open one after another (people arrive; a burst of handshakes is not what is measured).
    opened: list[Any] = []
    for tab in tabs:
        try:
            opened.append(await tab.__aenter__())
        except Exception as e:  # counted: a tab that could not connect streams nothing
            opened.append(e)
    live = [t for t, o in zip(tabs, opened) if not isinstance(o, BaseException)]
    errors = sorted({f"{type(o).__name__}: {o}" for o in opened if isinstance(o, BaseException)})
    before = _cpu(cluster)
    started = time.time()
    await asyncio.gather(*(t.ask(first + i, tokens) for i, t in enumerate(live)))
    reads = [asyncio.create_task(t.read(until=lambda f: bool(FINAL_RE.search(f)), timeout=120)) for t in live]
    _, late = await asyncio.wait(reads, timeout=150)  # a guard of its own: a read that ignores its timeout
    for task in late:
        task.cancel()
    wall = time.time() - started
    cpu = _cpu_delta(before, _cpu(cluster))
    await asyncio.gather(*(t.__aexit__() for t in live), return_exceptions=True)
    delivered = sum(len(t.final_tokens) for t in live)
    lost = sum(len(set(range(1, tokens + 1)) - set(t.final_tokens)) for t in tabs)
    total_cpu = sum(c for c in cpu if c is not None)
    ttft = [(t.first_token_at - started) * 1000 for t in live if t.first_token_at]
    return {
        "streams": streams,
        "connected": len(live),
        "connect_errors": errors[:3],
        "tokens_per_stream": tokens,
        "token_interval_ms": round(token_interval * 1000, 1),
        "completed": sum(1 for t in live if t.status == "complete"),
        "lost_tokens": lost,
        "reordered_frames": sum(t.reordered for t in live),
        "reconnects": sum(t.reconnects for t in live),  # sockets the server closed (1011), reopened
        "wall_s": round(wall, 2),
        "ttft_p50_ms": round(statistics.median(ttft), 1) if ttft else None,
        "ttft_p95_ms": round(pct(ttft, 0.95), 1) if ttft else None,
        "cpu_s_per_process": cpu,  # [holder, client, client, ...]
        "cpu_pct_per_process": [round(100 * c / wall, 1) if c is not None else None for c in cpu],
        "cpu_ms_per_token": round(1000 * total_cpu / delivered, 3) if delivered else None,
    }


async def measure_per_question(cluster: Cluster, *, questions: int, first: int) -> dict[str, Any]:
    cluster.set_fake("delay 0", "style plain")
    await asyncio.sleep(1.5)
    writes_before = cluster.database_writes()
    before = _cpu(cluster)
    failed = 0
    for i in range(questions):
        async with Tab(cluster, cluster.session_ids[first + i], cluster.port) as tab:
            await tab.ask(first + i, 1)
            if not await tab.read(until=lambda f: bool(FINAL_RE.search(f)), timeout=60) or tab.status != "complete":
                failed += 1
    cpu = _cpu_delta(before, _cpu(cluster))
    await asyncio.sleep(1.5)  # PostgreSQL's statistics are reported about once a second
    writes_after = cluster.database_writes()
    per = {k: round((writes_after[k] - writes_before[k]) / questions, 1) for k in writes_before}
    total = sum(c for c in cpu if c is not None)
    return {
        "questions": questions,
        "failed": failed,
        "cpu_ms_per_question": round(1000 * total / questions, 1),
        "cpu_ms_per_question_per_process": [round(1000 * c / questions, 1) if c is not None else None for c in cpu],
        "db_per_question": per,  # commits, rows inserted / updated / deleted (every process, each page load)
    }


async def measure_other_tab(cluster: Cluster, *, qid: int, session: str) -> dict[str, Any]:
    cluster.set_fake("delay 0.05", "style plain")
    tokens = 40
    client_port = cluster.ports[-1]
    async with Tab(cluster, session, client_port) as asker, Tab(cluster, session, cluster.ports[0]) as other:
        await asker.ask(qid, tokens)
        await asker.read(until=lambda f: bool(TOKEN_RE.search(f)), timeout=60)
        await other.ask(qid + 1, tokens)
        busy = await other.read(until=lambda f: BUSY in f, timeout=20)
        done = await asyncio.gather(
            asker.read(until=lambda f: bool(FINAL_RE.search(f)), timeout=60),
            other.read(until=lambda f: bool(FINAL_RE.search(f)), timeout=60),
        )
    full = list(range(1, tokens + 1))
    return {
        "asker_process": "client",
        "other_tab_process": "holder",
        "other_tab_refused_as_busy": busy,
        "both_tabs_got_every_token": all(done) and asker.final_tokens == full and other.final_tokens == full,
    }


async def measure_kill(cluster: Cluster, *, qid: int, session: str) -> dict[str, Any]:
    cluster.set_fake("delay 0.05", "style plain")
    tokens = 60
    victim = len(cluster.ports) - 1
    async with Tab(cluster, session, cluster.ports[victim]) as tab:
        await tab.ask(qid, tokens)
        await tab.read(until=lambda f: len(TOKEN_RE.findall(f)) >= 10, timeout=60)
        seen_before = len(tab.tokens)
        draft_id = tab.draft_id
        killed_at = time.time()
        cluster.kill_server(victim)
    # The page's reconnect: to the load balancer, which sends it to a live process.
    async with Tab(cluster, session, cluster.port, f"?sync={draft_id}") as again:
        reconnected = time.time()
        got = await again.read(until=lambda f: bool(FINAL_RE.search(f)), timeout=60)
    stored = await asyncio.to_thread(_answers_of, cluster, session)
    full = list(range(1, tokens + 1))
    return {
        "tokens_before_kill": seen_before,
        "reconnect_ms": round((reconnected - killed_at) * 1000, 1),
        "final_status": again.status,
        "final_tokens_exactly_once": got and again.final_tokens == full,
        "stored_answers": stored,  # [(status, tokens stored)] of the session: one, complete, 60
    }


def _answers_of(cluster: Cluster, session: str) -> list[tuple[str, int]]:
    import psycopg

    with psycopg.connect(cluster.database_url(cluster.database), connect_timeout=5) as conn:
        rows = conn.execute(
            "SELECT status, content FROM chat_message WHERE session_id = %s AND role = 'assistant' ORDER BY id",
            (session,),
        ).fetchall()
    return [(status, len(TOKEN_RE.findall(content))) for status, content in rows]


async def measure_open_tabs(cluster: Cluster, *, sockets: int) -> dict[str, Any]:
    from websockets.asyncio.client import connect

    port, pid = cluster.ports[1], cluster.pids()[1]
    before = process_rss_mb(pid) if pid else None
    stack = []
    try:
        for i in range(sockets):
            stack.append(
                await connect(
                    f"ws://127.0.0.1:{port}/ws/chat/{cluster.session_ids[i % len(cluster.session_ids)]}/",
                    origin=f"http://127.0.0.1:{port}",
                    additional_headers={"Cookie": f"sessionid={cluster.cookie}"},
                    ping_interval=None,
                )
            )
        await asyncio.sleep(2.0)
        during = process_rss_mb(pid) if pid else None
    finally:
        await asyncio.gather(*(ws.close() for ws in stack), return_exceptions=True)
    per = (during - before) * 1024 / len(stack) if before and during and stack else None
    return {
        "sockets": len(stack),
        "rss_before_mb": before,
        "rss_open_mb": during,
        "per_socket_kb": round(per, 1) if per is not None else None,
    }


async def scale_bench(
    *,
    processes: int = 3,
    streams: int = 60,
    tokens: int = 50,
    token_interval: float = 0.02,
    questions: int = 20,
    open_tabs: int = 300,
    postgres: str = "postgres://postgres@127.0.0.1:5432/postgres",
    redis: str = "redis://127.0.0.1:6379/0",
    say=print,
) -> dict[str, Any]:
    if processes < 2:
        raise ValueError("--scale needs at least 2 processes (a holder and a client)")
    cluster = Cluster(processes=processes, postgres=postgres, redis=redis, sessions=streams + questions + 10, say=say)
    out: dict[str, Any] = {"processes": processes, "roles": [], "chunks": cluster.chunks}
    try:
        await asyncio.to_thread(cluster.start)
        out["roles"] = [cluster.role(i) for i in range(processes)]
        say(f"{streams} streams through HAProxy over {processes} processes")
        out["spread"] = await measure_spread(
            cluster, streams=streams, tokens=tokens, token_interval=token_interval, first=0
        )
        say(f"{questions} questions one after another")
        out["per_question"] = await measure_per_question(cluster, questions=questions, first=streams)
        say(f"{open_tabs} open tabs on a client process")
        out["open_tabs"] = await measure_open_tabs(cluster, sockets=open_tabs)
        base = streams + questions
        say("the session's other tab on another process")
        out["other_tab"] = await measure_other_tab(cluster, qid=base, session=cluster.session_ids[base])
        say("a client process killed mid-answer")
        out["kill"] = await measure_kill(cluster, qid=base + 5, session=cluster.session_ids[base + 1])
        out["ingestion_workers"] = (
            "not run: db_worker processes need a Qdrant server (QDRANT_URL), and none can be installed here; "
            "with the embedded store its holder ingests (RAGCHAT_INGEST_BACKEND=inprocess)"
        )
    finally:
        await asyncio.to_thread(cluster.stop)
    return out
