"""Time to first token and concurrent streaming, through a real websocket to a real server process.

The server's CPU and memory figures include its child, the process that runs the embedding model
(ragchat.services.onnx_model.ModelProcess).

Three processes: this one (the websocket clients, which measure), a daphne server running the
project in a scratch data directory (SQLite, in-memory channel layer, embedded Qdrant filled by
server_setup with N chunks), and the fake Ollama (ragchat.bench.fake_llm) with numbered answers.

- TTFT overhead: one question at a time, each on a fresh chat session, zero-latency model:
  from sending {"question": ...} to the first frame holding the first answer token. With a model
  that answers instantly, all of that is the app (auth, DB writes, retrieval with the query
  embedding, prompt, streaming, rendering, websocket).
- Concurrent streams: N sessions ask at once; the model emits a token every token interval, one
  streamed chunk per token as Ollama does (or, with split pieces, the word and the space after it
  as two chunks: twice the client-side parsing per token). Each token's added latency = the first
  frame showing it minus its scheduled emission (start of the answer in the fake's log + (i - 1)
  interval). The schedule is the fake's intent: any lag of
  the fake itself counts against us; so the fake's own lag (its real end of answer against the
  schedule) and the latency against its real, interpolated emission times are reported too. Every frame's tokens must be exactly 1..k in order (else a
  reorder), and the final message must hold every token (else they are lost).
- New chats: N people, each signed in on the landing page, start a new chat at once, as the page
  does without script: the POST to the new-chat view stores the first question and redirects to the
  chat's page, which is fetched, and whose websocket connects with `?start=1`: the server answers
  the stored question once the page listens. TTFT from the websocket's open (its handshake done)
  to the first frame holding the first answer token; also from the click (the POST leaving). Every
  chat must be answered with every token.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragchat.bench.common import (
    family_total,
    pct,
    process_cpu_seconds,
    process_peak_rss_mb,
    process_rss_mb,
    start_fake_llm,
)
from ragchat.bench.server_setup import QUESTION_TOPIC
from ragchat.evaluation.runner import EMBEDDERS

TOKEN_RE = re.compile(r"tok(\d{4})x")
CSRF_INPUT_RE = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
NEW_CHAT_RE = re.compile(r"/chat/([0-9a-f-]{36})/$")  # where the new-chat POST redirects
FINAL_RE = re.compile(r'data-role="assistant" data-status="(complete|interrupted|failed)"')
ERROR_RE = re.compile(r'class="msg-error"[^>]*>(.*?)</p>', re.S)
TAG_RE = re.compile(r"<[^>]+>")
# The final answer carries its Markdown once more for the copy button; tokens are counted in the text shown.
COPY_ATTR_RE = re.compile(r'data-copy="[^"]*"')
REPO = Path(__file__).resolve().parents[2]
# A chat turn's steps in the server's turn timeline (chat.turn_state: Turn.mark), in the order reached:
# question and draft stored, shown, passages found, the request to the model sent, its first token
# out of the core, the first token sent to the tabs, the answer stored.
# "asked": when the server took the question from the socket (the turn's slot reserved).
TURN_STEPS = ("asked", "prepared", "shown", "context", "generating", "token", "first_token", "final")
# The same, with when the model (the fake) began each answer, from its own log, in its place.
REPORTED_STEPS = (*TURN_STEPS[:5], "model", *TURN_STEPS[5:])


def _spread(seconds: list[float]) -> list[float]:
    """p5 / p50 / p95 of a step's times (seconds after the burst began), as "where the time went" shows them."""
    return [round(pct(seconds, q), 3) for q in (0.05, 0.5, 0.95)]


def _used(before: float | None, after: float | None) -> float | None:
    """CPU seconds between two readings of a process's counter (None when either is missing)."""
    return after - before if before is not None and after is not None else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def question(qid: int, tokens: int) -> str:
    return f"Bench chat q{qid} t{tokens}: {QUESTION_TOPIC}"


@dataclass
class StreamResult:
    qid: int
    expected: int
    sent_at: float = 0.0
    first_token_at: float | None = None
    arrivals: dict[int, float] = field(default_factory=dict)
    final_tokens: list[int] = field(default_factory=list)
    status: str = ""
    reordered_frames: int = 0
    frames: int = 0
    error: str = ""  # the client's own failure (connection, timeout)
    answer_error: str = ""  # the error sentence the app showed with a failed/interrupted answer
    # New chats: when the POST left (the click), when the chat's page had arrived, the chat's id;
    # sent_at is then the websocket's open (its handshake done).
    clicked_at: float = 0.0
    page_at: float = 0.0
    session_id: str = ""

    @property
    def lost(self) -> int:
        return len(set(range(1, self.expected + 1)) - set(self.final_tokens))


class ScratchServer:
    """Fake Ollama + scratch data dir + daphne, started and stopped together."""

    def __init__(self, *, chunks: int, sessions: int, embedder: str, people: int = 0, say=print) -> None:
        self.chunks = chunks
        self.sessions_wanted = sessions
        self.embedder = embedder
        self.say = say
        self.dir = Path(tempfile.mkdtemp(prefix="ragchat-bench-chat-"))
        self.fake_log = self.dir / "fake.log"
        self.timeline = self.dir / "timeline.jsonl"  # one line per chat turn (settings.RAGCHAT_TURN_TIMELINE)
        self.fake: subprocess.Popen | None = None
        self.server: subprocess.Popen | None = None
        self.port = _free_port()
        self.cookie = ""
        self.sessions: list[str] = []
        self.people_wanted = people
        self.people: list[str] = []  # the session cookies of the people of the new-chat burst
        self.server_peak_mb: float | None = None

    def env(self, ollama_url: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            RAGCHAT_DATA_DIR=str(self.dir / "data"),
            DATABASE_URL=f"sqlite:///{self.dir / 'data' / 'db.sqlite3'}",
            REDIS_URL="",
            QDRANT_URL="",
            QDRANT_PATH="",
            MEDIA_ROOT=str(self.dir / "data" / "media"),
            OLLAMA_BASE_URL=ollama_url,
            EMBEDDING_BACKEND=self.embedder,
            EMBEDDING_MODEL=EMBEDDERS[self.embedder],
            LOG_LEVEL="ERROR",
            RAGCHAT_TURN_TIMELINE=str(self.timeline),
            # Production-like: DEBUG off (no query logging); plain ws/http on 127.0.0.1 (so the
            # cookies are not marked for HTTPS only: the new-chat clients send the CSRF cookie back).
            DJANGO_DEBUG="false",
            DJANGO_SECRET_KEY=secrets.token_urlsafe(40),
            DJANGO_SECURE_SSL_REDIRECT="false",
            DJANGO_SECURE_COOKIES="false",
            DJANGO_SETTINGS_MODULE="ragchat.settings",
            PYTHONPATH=str(REPO),
        )
        return env

    def start(self) -> None:
        self.fake, url = start_fake_llm(self.fake_log)
        env = self.env(url)
        (self.dir / "data").mkdir(parents=True, exist_ok=True)
        self.say(
            f"preparing the scratch server: {self.chunks} chunks, {self.sessions_wanted} sessions,"
            f" {self.people_wanted} more people"
        )
        setup = subprocess.run(
            [
                sys.executable,
                "-m",
                "ragchat.bench.server_setup",
                "--chunks",
                str(self.chunks),
                "--sessions",
                str(self.sessions_wanted),
                "--people",
                str(self.people_wanted),
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if setup.returncode != 0:
            raise RuntimeError(f"server setup failed:\n{setup.stderr[-3000:]}")
        info = json.loads(setup.stdout.strip().splitlines()[-1])
        self.cookie, self.sessions, self.people = info["cookie"], info["sessions"], info["people"]
        self.server = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), "ragchat.asgi:application"],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(self.dir / "daphne.log", "w"),
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                raise RuntimeError(f"daphne exited: {(self.dir / 'daphne.log').read_text()[-3000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("daphne did not start listening within 120 s")

    def set_delay(self, seconds: float) -> None:
        assert self.fake is not None
        self.fake.stdin.write(f"delay {seconds}\n")
        self.fake.stdin.flush()
        self.fake.stdout.readline()

    def set_style(self, *, markdown: bool, split_pieces: bool = False) -> None:
        assert self.fake is not None
        self.fake.stdin.write(f"style {'markdown' if markdown else 'plain'}\n")
        self.fake.stdin.write(f"pieces {'split' if split_pieces else 'token'}\n")
        self.fake.stdin.flush()
        self.fake.stdout.readline()
        self.fake.stdout.readline()

    def reply_times(self) -> tuple[dict[int, float], dict[int, float]]:
        """When the fake started each answer, and when it wrote the answer's last line."""
        starts: dict[int, float] = {}
        ends: dict[int, float] = {}
        if self.fake_log.exists():
            for line in self.fake_log.read_text().splitlines():
                parts = line.split()
                if parts[0] == "end":
                    ends.setdefault(int(parts[1]), float(parts[2]))
                else:
                    starts.setdefault(int(parts[0]), float(parts[1]))
        return starts, ends

    def turn_steps(self, session_ids: set[str], started: float) -> dict[str, Any]:
        """Where a burst's time went: for each step of a chat turn, the seconds after the burst
        began at which its turns reached it (p5 / p50 / p95), and the core's own embed and search
        times (ms): from the server's turn timeline, for these sessions' turns."""
        rows = []
        if self.timeline.exists():
            for line in self.timeline.read_text().splitlines():
                row = json.loads(line)
                if row.get("session_id") in session_ids and row.get("asked", 0) >= started - 1:
                    rows.append(row)
        steps: dict[str, Any] = {"turns": len(rows)}
        for step in TURN_STEPS:
            seconds = [row[step] - started for row in rows if step in row]
            if seconds:
                steps[step] = _spread(seconds)
        for stage in ("embed", "search"):
            ms = [row["core"][stage] for row in rows if stage in row.get("core", {})]
            if ms:
                steps[f"{stage}_ms"] = [round(statistics.median(ms), 1), round(pct(ms, 0.95), 1)]
        return steps

    def stop(self) -> None:
        if self.server is not None:
            self.server_peak_mb = family_total(process_peak_rss_mb, self.server.pid)
            self.server.terminate()
            try:
                self.server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.server.kill()
        if self.fake is not None:
            try:
                self.fake.stdin.close()
                self.fake.wait(timeout=10)
            except Exception:
                self.fake.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---- clients -----------------------------------------------------------------------------
    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def socket(self, session_id: str, *, cookies: str = "", query: str = "", open_timeout: float = 120):
        """A chat tab's websocket (`async with` it, or await it), signed in as the bench user unless
        `cookies` (a Cookie header) says whom."""
        from websockets.asyncio.client import connect

        return connect(
            f"ws://127.0.0.1:{self.port}/ws/chat/{session_id}/{query}",
            origin=self.origin,
            additional_headers={"Cookie": cookies or f"sessionid={self.cookie}"},
            max_size=None,
            open_timeout=open_timeout,
            ping_interval=None,
        )

    async def ask(
        self,
        session_id: str,
        qid: int,
        tokens: int,
        *,
        start: asyncio.Event | None = None,
        ready: asyncio.Semaphore | None = None,
        timeout: float = 300.0,
    ) -> StreamResult:
        result = StreamResult(qid=qid, expected=tokens, session_id=session_id)
        # Only the arrival time as frames come: the 200 clients share one process and a core with
        # the server's other neighbours, and parsing every frame as it came delayed the next
        # frames' timestamps (and took CPU from the server). Parsed at the end, also after an error
        # (the tokens that did arrive are not counted as lost).
        frames: list[tuple[float, str]] = []
        try:
            async with self.socket(session_id) as ws:
                if ready is not None:
                    ready.release()
                if start is not None:
                    await start.wait()
                result.sent_at = time.time()
                await ws.send(json.dumps({"question": question(qid, tokens)}))
                await _read_answer(ws, frames, timeout)
        except Exception as e:  # reported per stream; a failed stream counts its tokens as lost
            result.error = f"{type(e).__name__}: {e}"
        _read_frames(result, frames)
        return result

    async def new_chat(
        self,
        cookie: str,
        qid: int,
        tokens: int,
        *,
        start: asyncio.Event,
        ready: asyncio.Semaphore,
        timeout: float = 300.0,
    ) -> StreamResult:
        """One person (signed in by `cookie`) on the landing page starts a new chat when `start` is
        set, as the page does without script: the POST stores the question and redirects, the
        chat's page is fetched, its websocket connects with ?start=1 and the answer streams."""
        import httpx

        result = StreamResult(qid=qid, expected=tokens)
        frames: list[tuple[float, str]] = []
        try:
            async with httpx.AsyncClient(
                base_url=self.origin, cookies={"sessionid": cookie}, headers={"Origin": self.origin}, timeout=timeout
            ) as http:
                try:
                    landing = await http.get("/")  # the landing page, its composer ready
                    token = CSRF_INPUT_RE.search(landing.text)
                    if landing.status_code != 200 or token is None:
                        raise RuntimeError(f"the landing page answered {landing.status_code} without a form")
                finally:
                    ready.release()  # counted also when it failed: the burst does not wait for it
                await start.wait()
                result.clicked_at = time.time()
                made = await http.post(
                    "/chat/new/", data={"question": question(qid, tokens), "csrfmiddlewaretoken": token.group(1)}
                )
                found = NEW_CHAT_RE.search(made.headers.get("location", ""))
                if made.status_code != 302 or found is None:
                    raise RuntimeError(f"the new-chat POST answered {made.status_code}, not the chat's page")
                result.session_id = found.group(1)
                page = await http.get(made.headers["location"])  # the browser follows the redirect
                if page.status_code != 200 or "?start=1" not in page.text:
                    raise RuntimeError(f"the new chat's page answered {page.status_code} without ?start")
                result.page_at = time.time()
                cookies = "; ".join(f"{name}={value}" for name, value in http.cookies.items())
                async with self.socket(result.session_id, cookies=cookies, query="?start=1") as ws:
                    result.sent_at = time.time()  # the websocket's open
                    await _read_answer(ws, frames, timeout)
        except Exception as e:  # reported per chat; a failed chat counts its tokens as lost
            result.error = f"{type(e).__name__}: {e}"
        _read_frames(result, frames)
        return result


async def _read_answer(ws: Any, frames: list[tuple[float, str]], timeout: float) -> None:
    """Each frame with its arrival time, until the answer's final message (or the time is up)."""
    async with asyncio.timeout(timeout):
        async for frame in ws:
            text = frame if isinstance(frame, str) else frame.decode()
            frames.append((time.time(), text))
            if 'data-status="' in text and FINAL_RE.search(text):
                break


def _read_frames(result: StreamResult, frames: list[tuple[float, str]]) -> None:
    """What a client saw: each token's first arrival, frames out of order, the final status."""
    seen_max = 0
    for now, text in frames:
        numbers = [int(n) for n in TOKEN_RE.findall(COPY_ATTR_RE.sub("", text))]
        final = FINAL_RE.search(text)
        if numbers:
            result.frames += 1
            if numbers != list(range(1, len(numbers) + 1)) or len(numbers) < seen_max:
                result.reordered_frames += 1
            seen_max = max(seen_max, len(numbers))
            for n in numbers:
                result.arrivals.setdefault(n, now)
            if result.first_token_at is None:
                result.first_token_at = now
        if final:
            result.status = final.group(1)
            result.final_tokens = numbers
            shown = ERROR_RE.search(text)
            if shown:
                result.answer_error = " ".join(TAG_RE.sub(" ", shown.group(1)).split())
            break


async def measure_open_websockets(server: ScratchServer, *, sockets: int) -> dict[str, Any]:
    """The server's memory per open chat tab: RSS before, with `sockets` idle tabs connected (over
    the scratch sessions, several tabs per chat as people keep them), and the difference per tab."""
    assert server.server is not None
    pid = server.server.pid
    before = family_total(process_rss_mb, pid)
    stack: list[Any] = []
    failed = 0
    try:
        for i in range(sockets):
            session_id = server.sessions[i % len(server.sessions)]
            try:
                ws = await server.socket(session_id, open_timeout=60)
            except Exception:  # counted: a tab that could not connect holds no memory
                failed += 1
                continue
            stack.append(ws)
        await asyncio.sleep(2.0)  # every consumer has joined its groups and sent its first frames
        during = family_total(process_rss_mb, pid)
    finally:
        await asyncio.gather(*(ws.close() for ws in stack), return_exceptions=True)
    opened = len(stack)
    per_socket_kb = (during - before) * 1024 / opened if opened and during and before else None
    return {
        "sockets": opened,
        "failed": failed,
        "rss_before_mb": round(before, 1) if before else None,
        "rss_open_mb": round(during, 1) if during else None,
        "per_socket_kb": round(per_socket_kb, 1) if per_socket_kb is not None else None,
    }


async def measure_ttft(server: ScratchServer, *, samples: int, first_qid: int, tokens: int = 8) -> dict[str, Any]:
    server.set_delay(0.0)
    results = []
    for i in range(samples + 3):
        results.append(await server.ask(server.sessions[first_qid + i], first_qid + i, tokens))
    measured = [r for r in results[3:]]  # the first answers warm the server (model, connections)
    ttft = [(r.first_token_at - r.sent_at) * 1000 for r in measured if r.first_token_at]
    return {
        "samples": len(ttft),
        "ttft_p50_ms": round(statistics.median(ttft), 1) if ttft else None,
        "ttft_p95_ms": round(pct(ttft, 0.95), 1) if ttft else None,
        "ttft_max_ms": round(max(ttft), 1) if ttft else None,
        "failed": sum(1 for r in measured if r.error or r.status != "complete"),
        "lost_tokens": sum(r.lost for r in measured),
    }


@dataclass
class Burst:
    """Clients let go at once, and what the run cost (CPU seconds of the server with its embedding
    process, of the fake model, of this process's clients)."""

    results: list[StreamResult]
    started: float
    wall: float
    server_cpu: float | None
    model_cpu: float | None
    clients_cpu: float
    server_rss: float | None


async def run_burst(server: ScratchServer, client, count: int) -> Burst:
    """`count` clients (`client(i, start, ready)`, each releasing `ready` once set to go) started,
    then let go at once by `start`."""
    start = asyncio.Event()
    ready = asyncio.Semaphore(0)
    tasks = [asyncio.create_task(client(i, start, ready)) for i in range(count)]
    for _ in range(count):  # every client ready before anyone goes
        await asyncio.wait_for(ready.acquire(), 180)
    # Every client goes at once: a collection of this process's garbage (the clients of the
    # earlier phases) held back half the sends by 0.28 s in some runs, which made the burst two.
    gc.collect()
    gc.freeze()
    cpu_before = family_total(process_cpu_seconds, server.server.pid) if server.server else None
    fake_cpu_before = process_cpu_seconds(server.fake.pid) if server.fake else None
    clients_cpu_before = time.process_time()
    started = time.time()
    start.set()
    try:
        results: list[StreamResult] = await asyncio.gather(*tasks)
    finally:
        gc.unfreeze()
    wall = time.time() - started
    cpu_after = family_total(process_cpu_seconds, server.server.pid) if server.server else None
    return Burst(
        results=results,
        started=started,
        wall=wall,
        server_cpu=_used(cpu_before, cpu_after),
        model_cpu=_used(fake_cpu_before, process_cpu_seconds(server.fake.pid) if server.fake else None),
        clients_cpu=time.process_time() - clients_cpu_before,
        server_rss=family_total(process_rss_mb, server.server.pid) if server.server else None,
    )


def _answers(results: list[StreamResult]) -> dict[str, Any]:
    """What the clients saw of their answers: completed, errors, tokens lost or out of order."""
    return {
        "completed": sum(1 for r in results if r.status == "complete"),
        "statuses": dict(Counter(r.status or "no final message" for r in results)),
        "errors": sorted({r.error for r in results if r.error})[:3],
        "answer_errors": dict(Counter(r.answer_error for r in results if r.answer_error)),
        # Every token of every stream; then only those of answers the app completed (a failed
        # answer shows its error instead of the tokens it never received).
        "lost_tokens": sum(r.lost for r in results),
        "lost_tokens_in_completed": sum(r.lost for r in results if r.status == "complete"),
        "reordered_frames": sum(r.reordered_frames for r in results),
        "frames": sum(r.frames for r in results),
    }


def _costs(burst: Burst) -> dict[str, Any]:
    cpu, wall = burst.server_cpu, burst.wall
    return {
        "wall_s": round(wall, 2),
        # The server's CPU over the run (100% = one core: one process cannot use more than about that).
        "server_cpu_s": round(cpu, 2) if cpu is not None else None,
        "server_cpu_pct": round(100 * cpu / wall, 1) if cpu is not None and wall > 0 else None,
        "server_rss_mb": round(burst.server_rss, 1) if burst.server_rss else None,
        # The fake model's own CPU, and this process's (the websocket clients that measure): they
        # share the box's two cores with the server.
        "model_cpu_s": round(burst.model_cpu, 2) if burst.model_cpu is not None else None,
        "clients_cpu_s": round(burst.clients_cpu, 2),
    }


def _ms(values: list[float], q: float) -> float | None:
    return round(pct(values, q), 1) if values else None


def _where_the_time_went(server: ScratchServer, burst: Burst, session_ids: set[str]) -> dict[str, Any]:
    steps = server.turn_steps(session_ids, burst.started)
    # When the model (the fake) began each answer, from its log, on the same clock: between the
    # request sent ("generating") and the first token out of the core ("token").
    starts, _ = server.reply_times()
    began = [starts[r.qid] - burst.started for r in burst.results if r.qid in starts]
    if began:
        steps["model"] = _spread(began)
    return steps


async def measure_concurrent(
    server: ScratchServer,
    *,
    streams: int,
    first_qid: int,
    tokens: int,
    token_interval: float,
    markdown: bool = False,
    split_pieces: bool = False,
) -> dict[str, Any]:
    server.set_delay(token_interval / 2 if split_pieces else token_interval)
    server.set_style(markdown=markdown, split_pieces=split_pieces)

    def client(i: int, start: asyncio.Event, ready: asyncio.Semaphore):
        return server.ask(server.sessions[first_qid + i], first_qid + i, tokens, start=start, ready=ready)

    burst = await run_burst(server, client, streams)
    results = burst.results
    starts, ends = server.reply_times()
    added: list[float] = []  # against the fake's schedule
    added_actual: list[float] = []  # against when the fake really sent it (interpolated)
    fake_lag: list[float] = []
    ttft: list[float] = []
    for r in results:
        begin, end = starts.get(r.qid), ends.get(r.qid)
        if r.first_token_at:
            ttft.append((r.first_token_at - r.sent_at) * 1000)
        if begin is None:
            continue
        planned = (tokens - 1) * token_interval
        actual = (end - begin) if end is not None else planned
        fake_lag.append(max(0.0, actual - planned) * 1000)
        for n, at in r.arrivals.items():
            added.append((at - (begin + (n - 1) * token_interval)) * 1000)
            share = (n - 1) / (tokens - 1) if tokens > 1 else 0.0
            added_actual.append((at - (begin + share * actual)) * 1000)
    return {
        "streams": streams,
        "tokens_per_stream": tokens,
        "answer": "markdown" if markdown else "plain",
        "token_interval_ms": round(token_interval * 1000, 1),
        "chunks_per_token": 2 if split_pieces else 1,
        **_answers(results),
        "added_latency_p50_ms": round(statistics.median(added), 1) if added else None,
        "added_latency_p95_ms": _ms(added, 0.95),
        "added_latency_vs_sent_p95_ms": _ms(added_actual, 0.95),
        "fake_lag_p95_ms": _ms(fake_lag, 0.95),
        "ttft_p95_ms": _ms(ttft, 0.95),
        **_costs(burst),
        "steps": _where_the_time_went(server, burst, {r.session_id for r in results}),
        # When the clients sent their questions (seconds after the burst began, p5 / p50 / p95).
        "sent": _spread([r.sent_at - burst.started for r in results if r.sent_at]),
    }


async def measure_new_chats(
    server: ScratchServer,
    *,
    chats: int,
    first_qid: int,
    tokens: int,
    token_interval: float,
    markdown: bool = False,
    split_pieces: bool = False,
) -> dict[str, Any]:
    """`chats` people start a new chat from the landing page at once (ScratchServer.new_chat)."""
    if chats > len(server.people):
        raise ValueError(f"{chats} new chats need as many people; the scratch server has {len(server.people)}")
    server.set_delay(token_interval / 2 if split_pieces else token_interval)
    server.set_style(markdown=markdown, split_pieces=split_pieces)

    def client(i: int, start: asyncio.Event, ready: asyncio.Semaphore):
        return server.new_chat(server.people[i], first_qid + i, tokens, start=start, ready=ready)

    burst = await run_burst(server, client, chats)
    answered = [r for r in burst.results if r.first_token_at and r.sent_at]
    ttft = [(r.first_token_at - r.sent_at) * 1000 for r in answered]  # type: ignore[operator]
    from_click = [(r.first_token_at - r.clicked_at) * 1000 for r in answered]  # type: ignore[operator]
    page = [(r.page_at - r.clicked_at) * 1000 for r in burst.results if r.page_at]
    return {
        "chats": chats,
        "tokens_per_chat": tokens,
        "answer": "markdown" if markdown else "plain",
        "token_interval_ms": round(token_interval * 1000, 1),
        **_answers(burst.results),
        # From the websocket's open (the goal's measure), and from the click (the POST leaving).
        "ttft_samples": len(ttft),
        "ttft_p50_ms": _ms(ttft, 0.5),
        "ttft_p95_ms": _ms(ttft, 0.95),
        "ttft_max_ms": round(max(ttft), 1) if ttft else None,
        "click_to_first_token_p50_ms": _ms(from_click, 0.5),
        "click_to_first_token_p95_ms": _ms(from_click, 0.95),
        "click_to_page_p50_ms": _ms(page, 0.5),
        "click_to_page_p95_ms": _ms(page, 0.95),
        **_costs(burst),
        "steps": _where_the_time_went(server, burst, {r.session_id for r in burst.results if r.session_id}),
        # When the websockets opened (seconds after the clicks, p5 / p50 / p95).
        "opened": _spread([r.sent_at - burst.started for r in burst.results if r.sent_at]),
    }


async def chat_bench(
    *,
    chunks: int,
    ttft_samples: int,
    concurrency: list[int],
    tokens: int,
    token_interval: float,
    embedder: str,
    markdown: bool = False,
    split_pieces: bool = False,
    open_sockets: int = 500,
    new_chats: list[int] | None = None,
    say=print,
) -> dict[str, Any]:
    sessions = 3 + ttft_samples + sum(concurrency)
    new_chats = new_chats or []
    people = max(new_chats, default=0)  # each new-chat burst by the same people: one new chat each
    server = ScratchServer(chunks=chunks, sessions=sessions, embedder=embedder, people=people, say=say)
    out: dict[str, Any] = {"chunks": chunks, "embedder": EMBEDDERS[embedder]}
    try:
        await asyncio.to_thread(server.start)
        say("measuring time to first token")
        out["ttft"] = await measure_ttft(server, samples=ttft_samples, first_qid=0)
        say(f"{open_sockets} open chat tabs")
        out["open_websockets"] = await measure_open_websockets(server, sockets=open_sockets)
        qid = 3 + ttft_samples
        out["concurrent"] = []
        for n in concurrency:
            say(f"{n} concurrent streams")
            out["concurrent"].append(
                await measure_concurrent(
                    server,
                    streams=n,
                    first_qid=qid,
                    tokens=tokens,
                    token_interval=token_interval,
                    markdown=markdown,
                    split_pieces=split_pieces,
                )
            )
            qid += n
        out["new_chats"] = []
        for n in new_chats:
            say(f"{n} new chats at once from the landing page")
            out["new_chats"].append(
                await measure_new_chats(
                    server,
                    chats=n,
                    first_qid=qid,
                    tokens=tokens,
                    token_interval=token_interval,
                    markdown=markdown,
                    split_pieces=split_pieces,
                )
            )
            qid += n
    finally:
        await asyncio.to_thread(server.stop)
        out["server_peak_rss_mb"] = round(server.server_peak_mb, 1) if server.server_peak_mb else None
    return out
