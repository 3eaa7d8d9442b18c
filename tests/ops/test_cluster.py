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
