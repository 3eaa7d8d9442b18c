"""The multi-process run's load balancer: scripts/scale/haproxy.cfg as ragchat/bench/cluster.py
fills it in is accepted by Debian's HAProxy (`make test` installs it), balances without stickiness,
and sends what touches the embedded store to its holder only."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from ragchat.bench.cluster import STORE_PATHS, haproxy_config


def _check(tmp_path, text: str) -> subprocess.CompletedProcess:
    if shutil.which("haproxy") is None:
        pytest.skip("HAProxy is not installed (make haproxy)")
    path = tmp_path / "haproxy.cfg"
    path.write_text(text)
    return subprocess.run(["haproxy", "-c", "-f", str(path)], capture_output=True, text=True, timeout=30)


def test_embedded_store_config_sends_store_paths_to_the_holder(tmp_path):
    text = haproxy_config(port=18080, servers=[18001, 18002, 18003], holder=18001)
    done = _check(tmp_path, text)
    assert done.returncode == 0, done.stdout + done.stderr
    every, store = text.split("\nbackend every")[1].split("\nbackend store")
    assert [line.split()[2] for line in every.splitlines() if "server " in line] == [
        "127.0.0.1:18001",
        "127.0.0.1:18002",
        "127.0.0.1:18003",
    ]
    assert [line.split()[2] for line in store.splitlines() if "server " in line] == ["127.0.0.1:18001"]
    assert "balance roundrobin" in every and "cookie" not in text  # no sticky sessions
    assert all(path in text for path in STORE_PATHS) and "path /health" in text


def test_qdrant_server_config_balances_every_path_over_every_process(tmp_path):
    text = haproxy_config(port=18080, servers=[18001, 18002], holder=None)
    assert _check(tmp_path, text).returncode == 0
    store = text.split("\nbackend store")[1]
    assert [line.split()[2] for line in store.splitlines() if "server " in line] == [
        "127.0.0.1:18001",
        "127.0.0.1:18002",
    ]


@pytest.mark.slow
def test_the_cluster_serves_a_chat_through_haproxy_and_drops_its_database():
    """`make scale-run`'s cluster, small: PostgreSQL, Redis, a holder and a client behind HAProxy.
    Pages answer through the load balancer; a chat tab on the client streams an answer the holder
    runs; stopping it ends every process and drops the scratch database."""
    import asyncio

    psycopg = pytest.importorskip("psycopg")
    from ragchat.bench.chat_load import FINAL_RE
    from ragchat.bench.cluster import Cluster
    from ragchat.bench.scale import Tab
    from tests.ops.conftest import PG_ADMIN_URL as admin_url
    from tests.ops.test_scale_out import REDIS_URL

    if shutil.which("haproxy") is None:
        pytest.skip("HAProxy is not installed (make haproxy)")
    try:
        psycopg.connect(admin_url, connect_timeout=3).close()
        __import__("redis").Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except Exception as e:
        pytest.skip(f"PostgreSQL or Redis not reachable: {e}")
    import httpx

    cluster = Cluster(processes=2, postgres=admin_url, redis=REDIS_URL, chunks=200, sessions=3, say=lambda _: None)
    try:
        cluster.start()
        assert [cluster.role(0), cluster.role(1)] == ["holder", "client"]
        for _ in range(4):  # round robin: both processes answer
            assert httpx.get(cluster.url + "/accounts/login/", timeout=20).status_code == 200
        assert httpx.get(cluster.url + "/health", timeout=20).status_code == 200  # the holder's

        async def ask() -> Tab:
            cluster.set_fake("delay 0.01", "style plain")
            async with Tab(cluster, cluster.session_ids[0], cluster.ports[1]) as tab:
                await tab.ask(1, 12)
                await tab.read(until=lambda f: bool(FINAL_RE.search(f)), timeout=60)
            return tab

        tab = asyncio.run(ask())
        assert tab.status == "complete" and tab.final_tokens == list(range(1, 13))
        database = cluster.database
    finally:
        cluster.stop()
    assert all(p is None or p.poll() is not None for p in [cluster.haproxy, *cluster.servers])
    with psycopg.connect(admin_url, connect_timeout=3) as conn:
        assert conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone() is None
