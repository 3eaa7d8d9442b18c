"""`manage.py bench --quick` runs (websocket part against a real daphne process) and no streamed
token is lost or reordered; the new-chat burst answers every chat once. Times are reported, not
asserted."""

import asyncio
import json
import sqlite3
from io import StringIO

import pytest
from django.core.management import call_command

from ragchat.bench.chat_load import ScratchServer, measure_new_chats
from ragchat.bench.ingest import ingest_bench
from ragchat.bench.search import search_bench
from ragchat.evaluation.corpus import DOCUMENTS


# A daphne process, the fake model and hundreds of websocket clients on two cores shared with the
# other CI passes: past pytest's 120 s there.
@pytest.mark.timeout(480)
def test_bench_quick_chat_streams_lose_no_tokens(tmp_path):
    out = StringIO()
    call_command(
        "bench",
        "--quick",
        "--skip",
        "ingest",
        "--skip",
        "search",
        "--chat-embedder",
        "hashing",
        "--json",
        str(tmp_path / "bench.json"),
        "--figures",
        str(tmp_path / "benchmarks.json"),
        stdout=out,
        stderr=StringIO(),
    )
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    # The run's figures, in the section of its command line.
    section = json.loads((tmp_path / "benchmarks.json").read_text())[
        "manage.py bench --quick --skip ingest --skip search --chat-embedder hashing"
    ]
    values = {row["figure"]: row["value"] for row in section["figures"]}
    assert values["50 questions at once, 20-token answers: completed, lost / reordered tokens"] == "50 of 50, 0 / 0"
    chat = report["chat"]
    assert chat["ttft"]["samples"] == 10 and chat["ttft"]["failed"] == 0
    assert chat["ttft"]["lost_tokens"] == 0
    assert [c["streams"] for c in chat["concurrent"]] == [10, 50]
    for run in chat["concurrent"]:
        assert run["completed"] == run["streams"], run["errors"]
        assert run["lost_tokens"] == run["lost_tokens_in_completed"] == 0
        assert run["reordered_frames"] == 0
        assert run["frames"] >= run["streams"]
        assert run["added_latency_p95_ms"] is not None
        assert len(run["sent"]) == 3  # when the clients sent (p5 / p50 / p95): the burst is one
    assert chat["server_peak_rss_mb"] > 0
    assert "lost 0 (in completed answers 0)" in out.getvalue()
    # Memory per open chat tab: 100 idle tabs connected at once, all of them.
    tabs = chat["open_websockets"]
    assert tabs["sockets"] == 100 and tabs["failed"] == 0 and tabs["per_socket_kb"] is not None
    assert "100 open chat tabs (failed 0)" in out.getvalue()
    # New chats from the landing page, 10 then 50 at once: every one answered, every token there.
    assert [c["chats"] for c in chat["new_chats"]] == [10, 50]
    for run in chat["new_chats"]:
        assert run["completed"] == run["chats"] and run["lost_tokens"] == 0, run["errors"]
    assert values[
        "50 new chats at once from the landing page, 20-token answers: answered, lost / reordered tokens"
    ] == ("50 of 50, 0 / 0")
    assert "new chat   50 at once from the landing page" in out.getvalue()


@pytest.mark.timeout(300)
@pytest.mark.asyncio
async def test_new_chat_burst_answers_each_chat_once_through_its_start_socket():
    """Five people start a chat from the landing page at once (POST, the chat's page, its websocket
    with ?start): each gets its whole answer, and each chat holds one question and one answer."""
    server = ScratchServer(chunks=200, sessions=1, people=5, embedder="hashing", say=lambda message: None)
    try:
        await asyncio.to_thread(server.start)
        run = await measure_new_chats(server, chats=5, first_qid=0, tokens=12, token_interval=0.005)
        with sqlite3.connect(f"file:{server.dir / 'data' / 'db.sqlite3'}?mode=ro", uri=True, timeout=30) as db:
            stored = db.execute(
                "SELECT m.session_id, m.role, m.status FROM chat_message m JOIN chat_chatsession s"
                " ON s.id = m.session_id JOIN ragchat_user u ON u.id = s.owner_id WHERE u.username LIKE"
                " 'bench-person-%' ORDER BY m.id"
            ).fetchall()
    finally:
        await asyncio.to_thread(server.stop)
    assert run["chats"] == run["completed"] == run["ttft_samples"] == 5, (run["errors"], run["answer_errors"])
    assert run["lost_tokens"] == 0 and run["reordered_frames"] == 0 and not run["errors"]
    assert run["ttft_p95_ms"] >= run["ttft_p50_ms"] > 0 and run["click_to_first_token_p95_ms"] >= run["ttft_p95_ms"]
    assert run["steps"]["turns"] == 5 and len(run["opened"]) == 3
    chats: dict[str, list[tuple[str, str]]] = {}
    for session_id, role, status in stored:
        chats.setdefault(session_id, []).append((role, status))
    assert list(chats.values()) == [[("user", "complete"), ("assistant", "complete")]] * 5


@pytest.mark.asyncio
async def test_search_and_ingest_benchmarks_report_their_figures():
    search = await search_bench(chunks=600, searches=20)
    assert search["chunks"] == 600 and search["search_p95_ms"] >= search["search_p50_ms"] > 0
    # The dense stage against an exact scan of the same filtered chunks (tiny: exact anyway).
    assert search["dense_recall@10"] == 1.0 and search["exact_p95_ms"] >= search["exact_p50_ms"] > 0
    assert search["store_rss_mb"] > 0  # the open store's memory, measured in a process of its own
    ingest = await ingest_bench(embedder="hashing", rounds=1)
    assert ingest["documents"] == len(DOCUMENTS) and ingest["chunks"] > len(DOCUMENTS) and ingest["chunks_per_s"] > 0


def test_peers_bench_compares_systems_on_the_same_data(monkeypatch):
    from ragchat.bench import peers
    from ragchat.management.commands.bench import format_table

    rows = peers.peers_bench(chunks=800, searches=20, systems=("numpy", "ragchat"))
    by_system = {row["system"]: row for row in rows}
    # The exact scan is the truth; the product's store finds the same top 10 through its access filter.
    assert by_system["numpy"]["recall@10"] == 1.0
    assert by_system["ragchat"]["recall@10"] == 1.0
    for row in rows:
        assert row["chunks"] == 800 and row["p95_ms"] >= row["p50_ms"] > 0 and row["build_s"] >= 0
        assert row["rss_mb"] is not None
    # A peer that is not installed is named as such, not silently left out.
    monkeypatch.setitem(peers._MODULES, "lancedb", "no_such_module_for_the_bench")
    (missing,) = peers.peers_bench(chunks=50, searches=2, systems=("lancedb",))
    assert missing == {"system": "lancedb", "chunks": 50, "skipped": "not installed: pip install '.[peers]'"}
    table = format_table({"peers": [*rows, missing]})
    assert "x the exact scan's p95" in table and "lancedb" in table and "not installed" in table


@pytest.mark.slow  # embeds 300 passages with the local model
def test_peers_bench_on_real_prose_with_the_local_model(tmp_path):
    from ragchat.bench import peers

    texts = peers.real_texts(300)
    assert len(set(texts)) == 300 and all(len(t.split()) == peers.PASSAGE_WORDS for t in texts)
    rows = peers.peers_bench(chunks=300, searches=10, systems=("numpy", "ragchat"), real=True, cache_dir=tmp_path)
    assert [(r["system"], r["vectors"], r["recall@10"]) for r in rows] == [
        ("numpy", "real", 1.0),
        ("ragchat", "real", 1.0),
    ]
    assert list(tmp_path.glob("real-300-10-4-onnx-int8.npz"))  # a second run reuses them
