"""Several ragchat processes on one box, as a deployment runs them (docs/deploying.md "Scale-out"):

- PostgreSQL (a scratch database on the server at --postgres, dropped at the end) and the Redis
  channel layer (--redis, a prefix of its own);
- N daphne processes: the first holds the embedded vector store (RAGCHAT_STORE_ROLE=holder), the
  others are its clients (they never open it and hand their sockets' chat turns to it through Redis);
  with a Qdrant server (--qdrant-url) every process opens it and runs its own turns;
- M `db_worker` ingestion processes (django-tasks' database backend), only with a Qdrant server:
  a worker cannot open the embedded store the holder holds (ragchat/processes.py refuses it);
- HAProxy in front (Debian's package): round robin without stickiness, websockets upgraded; the
  requests that search or change the store (the JSON API, documents, view-as, the admin, /health)
  go to the holder when the store is embedded;
- the fake Ollama (ragchat.bench.fake_llm) as the model.

    python -m ragchat.bench.cluster --processes 3      # `make scale-run`: serves until Ctrl-C

prints the load balancer's address and a user to sign in with (scale / scale-password).
`manage.py bench --scale` starts the same cluster and measures it (ragchat/bench/scale.py).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ragchat.bench.common import create_scratch_database, drop_database, postgres_url, start_fake_llm
from ragchat.evaluation.runner import EMBEDDERS

REPO = Path(__file__).resolve().parents[2]
HAPROXY_CONFIG = REPO / "scripts" / "scale" / "haproxy.cfg"
# Requests that search or change the embedded store: to its holder (ragchat/processes.py).
STORE_PATHS = ("/api/", "/documents/", "/access/", "/admin/")
USERNAME, PASSWORD = "scale", "scale-password"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, process: subprocess.Popen, log: Path, *, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{log.name}: the process exited:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{log.name}: not listening on {port} within {timeout:.0f} s")


def haproxy_config(*, port: int, servers: list[int], holder: int | None) -> str:
    """The config of scripts/scale/haproxy.cfg with this run's ports filled in."""
    text = HAPROXY_CONFIG.read_text()
    every = "\n".join(f"    server p{i} 127.0.0.1:{p} check inter 1s fall 3 rise 2" for i, p in enumerate(servers))
    store = f"    server holder 127.0.0.1:{holder} check inter 1s fall 3 rise 2" if holder else every
    return (
        text.replace("{{PORT}}", str(port))
        .replace("{{SERVERS}}", every)
        .replace("{{STORE_SERVERS}}", store)
        .replace("{{STORE_PATHS}}", " ".join(STORE_PATHS))
    )


@dataclass
class Cluster:
    processes: int = 3
    workers: int = 0
    postgres: str = "postgres://postgres@127.0.0.1:5432/postgres"
    redis: str = "redis://127.0.0.1:6379/0"
    qdrant_url: str = ""
    chunks: int = 2000
    sessions: int = 300
    embedder: str = "hashing"
    say: object = print
    dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="ragchat-cluster-")))
    port: int = field(default_factory=free_port)
    ports: list[int] = field(default_factory=list)
    servers: list[subprocess.Popen | None] = field(default_factory=list)
    workers_running: list[subprocess.Popen] = field(default_factory=list)
    fake: subprocess.Popen | None = None
    haproxy: subprocess.Popen | None = None
    database: str = ""
    cookie: str = ""
    session_ids: list[str] = field(default_factory=list)
    prefix: str = field(default_factory=lambda: f"ragchat-cluster-{uuid.uuid4().hex[:8]}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def database_url(self, name: str) -> str:
        return postgres_url(self.postgres, name)

    def env(self, ollama_url: str, *, role: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            RAGCHAT_DATA_DIR=str(self.dir / "data"),
            DATABASE_URL=self.database_url(self.database),
            REDIS_URL=self.redis,
            CHANNELS_PREFIX=self.prefix,
            QDRANT_URL=self.qdrant_url,
            QDRANT_PATH="",
            RAGCHAT_STORE_ROLE=role,
            RAGCHAT_INGEST_BACKEND="tasks" if self.qdrant_url and self.workers else "inprocess",
            MEDIA_ROOT=str(self.dir / "data" / "media"),  # one folder every process sees
            OLLAMA_BASE_URL=ollama_url,
            EMBEDDING_BACKEND=self.embedder,
            EMBEDDING_MODEL=EMBEDDERS[self.embedder],
            LOG_LEVEL="WARNING",
            DJANGO_DEBUG="false",
            DJANGO_SECRET_KEY=self.secret,
            DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
            DJANGO_SECURE_SSL_REDIRECT="false",
            DJANGO_SECURE_COOKIES="false",
            DJANGO_SECURE_HSTS_SECONDS="0",
            DJANGO_SETTINGS_MODULE="ragchat.settings",
            PYTHONPATH=str(REPO),
        )
        return env

    def role(self, index: int) -> str:
        if self.qdrant_url:
            return "own"
        return "holder" if index == 0 else "client"

    # ---- start and stop ----------------------------------------------------------------------
    def start(self) -> Cluster:
        if shutil.which("haproxy") is None:
            raise RuntimeError("HAProxy is not installed: `make haproxy` (Debian's package)")
        if self.workers and not self.qdrant_url:
            raise RuntimeError(
                "ingestion workers need a Qdrant server (--qdrant-url): a db_worker cannot open the embedded "
                "store the holder holds (ragchat/processes.py)"
            )
        self.secret = secrets.token_urlsafe(40)
        self.database = create_scratch_database(self.postgres, "ragchat_cluster", connect_timeout=5)
        self.fake, self.ollama_url = start_fake_llm(self.dir / "fake.log")
        (self.dir / "data").mkdir(parents=True, exist_ok=True)
        self.say(f"scratch database {self.database}: migrating, {self.chunks} chunks, {self.sessions} chat sessions")
        setup = subprocess.run(
            [sys.executable, "-m", "ragchat.bench.server_setup", "--chunks", str(self.chunks)]
            + ["--sessions", str(self.sessions), "--username", USERNAME, "--password", PASSWORD],
            cwd=REPO,
            env=self.env(self.ollama_url, role=self.role(0)),
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if setup.returncode != 0:
            raise RuntimeError(f"setup failed:\n{setup.stderr[-3000:]}")
        info = json.loads(setup.stdout.strip().splitlines()[-1])
        self.cookie, self.session_ids = info["cookie"], info["sessions"]
        self.ports = [free_port() for _ in range(self.processes)]
        self.servers = [None] * self.processes
        for i in range(self.processes):
            self.start_server(i)
        for i in range(self.workers):
            log = self.dir / f"worker{i}.log"
            self.workers_running.append(
                subprocess.Popen(
                    [sys.executable, "manage.py", "db_worker", "--queue-name", "ingestion", "--no-reload"],
                    cwd=REPO,
                    env=self.env(self.ollama_url, role="own"),
                    stdout=open(log, "w"),
                    stderr=subprocess.STDOUT,
                )
            )
        config = self.dir / "haproxy.cfg"
        holder = None if self.qdrant_url else self.ports[0]
        config.write_text(haproxy_config(port=self.port, servers=self.ports, holder=holder))
        check = subprocess.run(["haproxy", "-c", "-q", "-f", str(config)], capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError(f"HAProxy refused its config:\n{check.stderr}")
        log = self.dir / "haproxy.log"
        self.haproxy = subprocess.Popen(
            ["haproxy", "-db", "-f", str(config)], stdout=open(log, "w"), stderr=subprocess.STDOUT
        )
        wait_listening(self.port, self.haproxy, log, timeout=20)
        time.sleep(1.5)  # HAProxy's first health checks mark the servers up
        return self

    def start_server(self, index: int) -> None:
        log = self.dir / f"daphne{index}.log"
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                str(self.ports[index]),
                "ragchat.asgi:application",
            ],
            cwd=REPO,
            env={**self.env(self.ollama_url, role=self.role(index)), "RAGCHAT_WARMUP": "1" if index == 0 else "0"},
            stdout=subprocess.DEVNULL,
            stderr=open(log, "w"),
        )
        self.servers[index] = process
        wait_listening(self.ports[index], process, log)

    def kill_server(self, index: int) -> None:
        """SIGKILL: no shutdown of any kind (a crash, an OOM kill)."""
        process = self.servers[index]
        if process is not None:
            process.kill()
            process.wait(timeout=10)
            self.servers[index] = None

    def pids(self) -> list[int | None]:
        return [p.pid if p is not None else None for p in self.servers]

    def set_fake(self, *commands: str) -> None:
        """`delay S`, `style markdown|plain`, `pieces split|token` (ragchat.bench.fake_llm)."""
        assert self.fake is not None and self.fake.stdin is not None and self.fake.stdout is not None
        for command in commands:
            self.fake.stdin.write(command + "\n")
            self.fake.stdin.flush()
            self.fake.stdout.readline()

    def stop(self) -> None:
        for process in [self.haproxy, *self.workers_running, *self.servers]:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in [self.haproxy, *self.workers_running, *self.servers]:
            if process is not None:
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
        if self.fake is not None:
            try:
                self.fake.stdin.close()
                self.fake.wait(timeout=10)
            except Exception:
                self.fake.kill()
        if self.database:
            drop_database(self.postgres, self.database, connect_timeout=5)
            self.database = ""
        shutil.rmtree(self.dir, ignore_errors=True)

    def _admin(self):
        import psycopg

        return psycopg.connect(self.postgres, autocommit=True, connect_timeout=5)

    def database_writes(self) -> dict[str, int]:
        """The scratch database's committed transactions and rows written so far (pg_stat_database;
        the statistics collector reports with a delay of up to a second)."""
        with self._admin() as admin:
            row = admin.execute(
                "SELECT xact_commit, tup_inserted, tup_updated, tup_deleted FROM pg_stat_database WHERE datname = %s",
                (self.database,),
            ).fetchone()
        return {"commits": row[0], "inserted": row[1], "updated": row[2], "deleted": row[3]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=3, help="daphne processes behind HAProxy (default 3)")
    parser.add_argument("--workers", type=int, default=0, help="db_worker ingestion processes (needs --qdrant-url)")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--qdrant-url", default="", help="a Qdrant server (else the embedded store, one holder)")
    parser.add_argument("--chunks", type=int, default=2000)
    args = parser.parse_args()
    cluster = Cluster(
        processes=args.processes,
        workers=args.workers,
        postgres=args.postgres,
        redis=args.redis,
        qdrant_url=args.qdrant_url,
        chunks=args.chunks,
        sessions=5,
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stopped like Ctrl-C: everything ends with it
    try:
        cluster.start()
        roles = ", ".join(f"{cluster.role(i)} :{p}" for i, p in enumerate(cluster.ports))
        print(f"ragchat on {cluster.url}/ (HAProxy, round robin over {roles}); sign in as {USERNAME} / {PASSWORD}")
        print(f"logs in {cluster.dir}; Ctrl-C stops everything and drops the scratch database", flush=True)
        while all(p is not None and p.poll() is None for p in [cluster.haproxy, *cluster.servers]):
            time.sleep(1)
        print("a process of the cluster ended: stopping")
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
