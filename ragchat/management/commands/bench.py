"""manage.py bench: ingestion throughput, filtered search latency, time to first token through a real
websocket, N concurrent streams, peak memory; a table, then one JSON line. Nothing touches the live
database or index: every part runs in scratch directories (or a scratch collection on QDRANT_URL).
"""

import asyncio
import json
import logging
import os
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from ragchat.bench.chat_load import REPORTED_STEPS
from ragchat.bench.common import peak_rss_mb
from ragchat.bench.figures import FIGURES_FILE, bench_rows, figures_record

GOALS = {
    "search_p95_ms_100k": 25.0,  # our goal; docs/specs/rag-standard-v1.md A7 asks <= 300 ms
    "ttft_overhead_p95_ms_10k": 100.0,
    "lost_tokens": 0,
}


class Command(BaseCommand):
    help = "Benchmark ingestion, filtered search, TTFT through a websocket and concurrent streaming."

    def add_arguments(self, parser):
        parser.add_argument("--quick", action="store_true", help="small sizes (about a minute)")
        parser.add_argument("--json", dest="json_out", help="also write the report here")
        parser.add_argument(
            "--figures",
            default=str(FIGURES_FILE),
            help="the figures file whose section of this command line the run replaces (default: %(default)s,"
            " under the project folder; ragchat/bench/figures.py)",
        )
        parser.add_argument("--no-figures", action="store_true", help="leave the figures file alone")
        parser.add_argument("--skip", action="append", default=[], choices=["ingest", "search", "chat", "report"])
        parser.add_argument(
            "--peers",
            action="store_true",
            help="also load the search bench's chunks and queries into the systems one might pick instead"
            " (NumPy exact scan; LanceDB and Chroma when installed: pip install '.[peers]') and compare"
            " build time, p50/p95, recall@10 and memory side by side",
        )
        parser.add_argument(
            "--real-set",
            type=int,
            default=0,
            metavar="N",
            help="with --peers, also compare on N passages of real prose on this machine embedded by the"
            " local model (20000 takes minutes the first time; the vectors are cached)",
        )
        parser.add_argument(
            "--token-interval-ms",
            type=float,
            default=20.0,
            help="the fake model's time between tokens in the concurrency runs (20 = 50 tokens/s)",
        )
        parser.add_argument(
            "--answer",
            choices=["markdown", "plain"],
            default="markdown",
            help="shape of the fake model's answers: markdown (bold, paragraphs, citations: what"
            " a real answer costs to render) or plain numbered words",
        )
        parser.add_argument(
            "--split-pieces",
            action="store_true",
            help="the fake streams each word and each space as its own chunk (twice Ollama's"
            " chunks per token; the default is one chunk per token, as Ollama sends)",
        )
        parser.add_argument("--tokens", type=int, default=None, help="tokens per answer in the concurrency runs")
        parser.add_argument(
            "--streams",
            type=int,
            action="append",
            default=None,
            help="concurrent streams (repeatable; default 50 and 200, 10 and 50 with --quick)",
        )
        parser.add_argument(
            "--new-chats",
            type=int,
            action="append",
            default=None,
            help="people starting a new chat at once from the landing page: the POST stores the question,"
            " the chat's websocket answers it with ?start (repeatable; default 50 and 200, 10 and 50 with --quick)",
        )
        parser.add_argument(
            "--scale",
            action="store_true",
            help="only the multi-process run (ragchat/bench/cluster.py: PostgreSQL, Redis, N daphne behind"
            " HAProxy): streams spread over the processes, per-question cost and database writes, a"
            " session's other tab on another process, a process killed mid-answer",
        )
        parser.add_argument("--processes", type=int, default=3, help="daphne processes of --scale (default 3)")
        parser.add_argument(
            "--postgres",
            default="postgres://postgres@127.0.0.1:5432/postgres",
            help="PostgreSQL server of --scale (a scratch database is created and dropped)",
        )
        parser.add_argument("--redis", default="redis://127.0.0.1:6379/0", help="Redis of --scale")
        parser.add_argument(
            "--chat-chunks",
            type=int,
            default=None,
            metavar="N",
            help="chunks in the websocket server's store (default 10000, 2000 with --quick); 100000 gives"
            " the server's memory at that size",
        )
        parser.add_argument(
            "--chat-embedder",
            choices=["local", "hashing"],
            default=None,
            help="embedder of the websocket server (default: local; hashing with --quick)",
        )

    def handle(
        self,
        *args,
        quick,
        json_out,
        skip,
        chat_embedder,
        token_interval_ms,
        chat_chunks=None,
        answer="markdown",
        tokens=None,
        streams=None,
        new_chats=None,
        split_pieces=False,
        peers=False,
        real_set=0,
        **options,
    ):
        if options.get("scale"):
            self.scale(
                json_out=json_out,
                processes=options["processes"],
                postgres=options["postgres"],
                redis=options["redis"],
                streams=(streams or [60])[0],
                tokens=tokens or 50,
                token_interval_ms=token_interval_ms,
            )
            return
        quiet = logging.getLogger("ragchat")
        previous_level = quiet.level  # restored: call_command (tests) must not silence the process
        quiet.setLevel(logging.ERROR)
        try:
            report = asyncio.run(
                self.run(
                    quick=quick,
                    skip=set(skip),
                    chat_embedder=chat_embedder,
                    chat_chunks=chat_chunks,
                    token_interval_ms=token_interval_ms,
                    answer=answer,
                    tokens=tokens,
                    streams=streams,
                    new_chats=new_chats,
                    split_pieces=split_pieces,
                    peers=peers,
                    real_set=real_set,
                )
            )
        finally:
            quiet.setLevel(previous_level)
        report["bench_process_peak_rss_mb"] = round(peak_rss_mb(), 1)
        self.stdout.write(format_table(report))
        if json_out:
            Path(json_out).write_text(json.dumps(report, indent=2))
        if not options.get("no_figures"):
            command = " ".join(
                ["manage.py bench"]
                + (["--quick"] if quick else [])
                + [f"--skip {part}" for part in sorted(set(skip))]
                + ([f"--chat-embedder {chat_embedder}"] if chat_embedder else [])
                + ([f"--chat-chunks {chat_chunks}"] if chat_chunks else [])
                + ([f"--answer {answer}"] if answer != "markdown" else [])
                + ([f"--tokens {tokens}"] if tokens else [])
                + [f"--streams {n}" for n in streams or []]
                + [f"--new-chats {n}" for n in new_chats or []]
                + ([f"--token-interval-ms {token_interval_ms:g}"] if token_interval_ms != 20.0 else [])
                + (["--split-pieces"] if split_pieces else [])
                + (["--peers"] if peers else [])
                + ([f"--real-set {real_set}"] if real_set else [])
            )
            path = _project_path(options["figures"])
            readme = Path(settings.BASE_DIR) / "README.md" if path == _project_path(str(FIGURES_FILE)) else None
            figures_record(command, command=command, rows=bench_rows(report), path=path, readme=readme)
            self.stderr.write(f"figures written to {path}")
        self.stdout.write(json.dumps(report))

    def scale(self, *, json_out, processes, postgres, redis, streams, tokens, token_interval_ms) -> None:
        from ragchat.bench.scale import scale_bench

        report = asyncio.run(
            scale_bench(
                processes=processes,
                streams=streams,
                tokens=tokens,
                token_interval=token_interval_ms / 1000,
                postgres=postgres,
                redis=redis,
                say=lambda message: self.stderr.write(message),
            )
        )
        if json_out:
            Path(json_out).write_text(json.dumps(report, indent=2))
        self.stdout.write(json.dumps(report, indent=2))

    async def run(
        self,
        *,
        quick: bool,
        skip: set[str],
        chat_embedder: str | None,
        chat_chunks: int | None = None,
        token_interval_ms: float = 20.0,
        answer: str = "markdown",
        tokens: int | None = None,
        streams: list[int] | None = None,
        new_chats: list[int] | None = None,
        split_pieces: bool = False,
        peers: bool = False,
        real_set: int = 0,
    ) -> dict:
        from ragchat.bench.chat_load import chat_bench
        from ragchat.bench.ingest import ingest_bench
        from ragchat.bench.search import search_bench

        say = lambda message: self.stderr.write(message)  # noqa: E731
        report: dict = {"quick": quick, "goals": GOALS}
        if "ingest" not in skip:
            report["ingest"] = []
            for embedder in ("hashing", "local"):
                say(f"ingestion, {embedder} embedder")
                report["ingest"].append(
                    await ingest_bench(embedder=embedder, rounds=1 if quick else 3, base=settings.RAG)
                )
        if "search" not in skip:
            report["search"] = []
            sizes = [2_000, 10_000] if quick else [10_000, 100_000]
            searches = 100 if quick else 300
            for size in sizes:
                say(f"search, embedded store, {size} chunks")
                report["search"].append(await search_bench(chunks=size, searches=searches, backend="edge"))
            qdrant_url = os.environ.get("QDRANT_URL", "") or settings.RAG.qdrant_url
            if qdrant_url:
                for size in sizes:
                    say(f"search, Qdrant server at {qdrant_url}, {size} chunks")
                    report["search"].append(
                        await search_bench(chunks=size, searches=searches, backend="server", qdrant_url=qdrant_url)
                    )
        if peers:
            from ragchat.bench.peers import peers_bench

            size = 10_000 if quick else 100_000
            say(f"peers, {size} chunks, each system in a process of its own")
            report["peers"] = await asyncio.to_thread(peers_bench, chunks=size, searches=100 if quick else 300)
            if real_set:
                say(f"peers, {real_set} passages of real prose, local model vectors")
                report["peers"] += await asyncio.to_thread(
                    peers_bench,
                    chunks=real_set,
                    searches=100 if quick else 300,
                    real=True,
                    runtime=settings.RAG.embedding_runtime,
                )
        if "report" not in skip:
            from ragchat.bench.report import report_bench

            messages = 100_000 if quick else 1_000_000
            say(f"knowledge-gap report, {messages} messages in a scratch database")
            report["report"] = await asyncio.to_thread(report_bench, messages=messages)
        if "chat" not in skip:
            report["chat"] = await chat_bench(
                chunks=chat_chunks or (2_000 if quick else 10_000),
                ttft_samples=10 if quick else 40,
                concurrency=streams or ([10, 50] if quick else [50, 200]),
                tokens=tokens or (20 if quick else 50),
                markdown=answer == "markdown",
                token_interval=token_interval_ms / 1000,
                split_pieces=split_pieces,
                embedder=chat_embedder or ("hashing" if quick else "local"),
                open_sockets=100 if quick else 500,
                new_chats=new_chats or ([10, 50] if quick else [50, 200]),
                say=say,
            )
        return report


def _project_path(path: str) -> Path:
    """A relative figures path is the project folder's, wherever the command runs from."""
    return Path(path) if Path(path).is_absolute() else Path(settings.BASE_DIR) / path


def format_table(report: dict) -> str:
    lines = []
    for row in report.get("ingest", []):
        stages = ", ".join(f"{k} {v:.2f}s" for k, v in row["stage_seconds"].items())
        lines.append(
            f"ingest   {row['embedder']:<18} {row['chunks']:>6} chunks  {row['chunks_per_s']:>8.1f} chunks/s"
            f"  ({row['documents']} files; {stages})"
        )
    for row in report.get("search", []):
        lines.append(
            f"search   {row['backend']:<18} {row['chunks']:>6} chunks  p50 {row['search_p50_ms']:.1f} ms"
            f"  p95 {row['search_p95_ms']:.1f} ms  (with query embedding p95 {row['embed_search_p95_ms']:.1f} ms;"
            f" upsert {row['upsert_chunks_per_s']} chunks/s; the open store adds {row.get('store_rss_mb')} MB RSS)"
        )
        if row.get("dense_recall@10") is not None:
            lines.append(
                f"recall   {row['backend']:<18} {row['chunks']:>6} chunks  dense stage recall@10 {row['dense_recall@10']:.3f}"
                f" of the exact filtered top 10 (p50 {row['dense_p50_ms']:.1f} ms, p95 {row['dense_p95_ms']:.1f} ms;"
                f" exact scan p50 {row['exact_p50_ms']:.1f} ms, p95 {row['exact_p95_ms']:.1f} ms)"
            )
    peers = report.get("peers") or []
    for row in peers:
        if "skipped" in row:
            lines.append(f"peers    {row['system']:<18} {row['chunks']:>6} chunks  {row['skipped']}")
            continue
        exact = next(
            (r for r in peers if r["system"] == "numpy" and r.get("vectors") == row.get("vectors") and "p50_ms" in r),
            None,
        )
        versus = f"; {row['p95_ms'] / exact['p95_ms']:.2f}x the exact scan's p95" if exact and exact["p95_ms"] else ""
        lines.append(
            f"peers    {row['system']:<18} {row['chunks']:>6} {row.get('vectors', 'hashing')} vectors"
            f"  build {row['build_s']:.1f} s"
            f"  p50 {row['p50_ms']:.1f} ms  p95 {row['p95_ms']:.1f} ms  recall@10 {row['recall@10']:.3f}"
            f"  RSS +{row['rss_mb']} MB{versus}"
        )
    gap = report.get("report")
    if gap:
        lines.append(
            f"report   knowledge gap, {gap['messages']} messages: one tag median {gap['report']['tag']['median_s']} s"
            f" (max {gap['report']['tag']['max_s']} s), no tag median {gap['report']['no_tag']['median_s']} s"
            f" (goal {gap['goal_s']:g} s; built in {gap['build_s']} s)"
        )
    chat = report.get("chat")
    if chat:
        t = chat["ttft"]
        lines.append(
            f"ttft     websocket, {chat['embedder']}, {chat['chunks']} chunks: p50 {t['ttft_p50_ms']} ms"
            f"  p95 {t['ttft_p95_ms']} ms  ({t['samples']} questions, zero-latency model, failed {t['failed']})"
        )
        w = chat.get("open_websockets")
        if w:
            lines.append(
                f"memory   {w['sockets']} open chat tabs (failed {w['failed']}): server RSS {w['rss_before_mb']} ->"
                f" {w['rss_open_mb']} MB, {w['per_socket_kb']} KB per tab"
            )
        for c in chat["concurrent"]:
            lines.append(
                f"streams  {c['streams']:>4} concurrent x {c['tokens_per_stream']} tokens ({c['token_interval_ms']} ms/token,"
                f" {c.get('answer', 'plain')}):"
                f" completed {c['completed']}, lost {c['lost_tokens']} (in completed answers"
                f" {c['lost_tokens_in_completed']}), reordered {c['reordered_frames']},"
                f" added latency p50 {c['added_latency_p50_ms']} ms p95 {c['added_latency_p95_ms']} ms"
                f" (vs sent p95 {c['added_latency_vs_sent_p95_ms']} ms; fake lag p95 {c['fake_lag_p95_ms']} ms),"
                f" ttft p95 {c['ttft_p95_ms']} ms, wall {c['wall_s']} s,"
                f" server CPU {c.get('server_cpu_pct')}% of a core, RSS {c.get('server_rss_mb')} MB;"
                f" CPU s server {c.get('server_cpu_s')}, model {c.get('model_cpu_s')}, clients {c.get('clients_cpu_s')}"
            )
            if c["answer_errors"]:
                lines.append(f"         answers the app failed: {c['statuses']} {c['answer_errors']}")
            lines += _steps_line(c.get("steps") or {})
        for c in chat.get("new_chats", []):
            lines.append(
                f"new chat {c['chats']:>4} at once from the landing page x {c['tokens_per_chat']} tokens:"
                f" answered {c['completed']} of {c['chats']}, lost {c['lost_tokens']}, reordered {c['reordered_frames']},"
                f" ttft from the websocket's open p50 {c['ttft_p50_ms']} ms p95 {c['ttft_p95_ms']} ms"
                f" (max {c['ttft_max_ms']} ms); from the click p50 {c['click_to_first_token_p50_ms']} ms"
                f" p95 {c['click_to_first_token_p95_ms']} ms, the chat's page p95 {c['click_to_page_p95_ms']} ms;"
                f" sockets opened {'/'.join(f'{s:.2f}' for s in c['opened'])} s after the clicks (p5/p50/p95),"
                f" wall {c['wall_s']} s, server CPU {c.get('server_cpu_pct')}% of a core"
            )
            if c["errors"] or c["answer_errors"]:
                lines.append(f"         failed: {c['statuses']} {c['errors']} {c['answer_errors']}")
            lines += _steps_line(c.get("steps") or {})
        lines.append(f"memory   server peak RSS {chat['server_peak_rss_mb']} MB")
    lines.append(f"memory   bench process peak RSS {report.get('bench_process_peak_rss_mb')} MB")
    return "\n".join(lines)


def _steps_line(steps: dict) -> list[str]:
    """Where a burst's time went (the server's turn timeline), as one line; none without turns."""
    if not steps.get("turns"):
        return []
    reached = ", ".join(
        f"{step.replace('_', ' ')} {'/'.join(f'{s:.2f}' for s in steps[step])}"
        for step in REPORTED_STEPS
        if step in steps
    )
    core = ", ".join(
        f"{stage} {'/'.join(str(v) for v in steps[f'{stage}_ms'])} ms"
        for stage in ("embed", "search")
        if f"{stage}_ms" in steps
    )
    return [
        f"         where the time went: seconds after the burst began, p5/p50/p95: {reached};"
        f" the core's p50/p95: {core}"
    ]
