"""Shared pieces of the benchmarks: synthetic chunks, percentiles, memory, a scratch PostgreSQL database."""

from __future__ import annotations

import os
import random
import resource
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ragchat.services.types import ChunkRecord
from ragchat.services.vector_store import PUBLIC_TAG

TAGS = [PUBLIC_TAG, "hr", "finance", "it", "legal", "sales", "engineering", "security"]
WORDS = (
    "policy employee vacation leave expense report receipt salary band review vpn gateway access "
    "badge server room incident root cause deployment release contract customer invoice payment "
    "laptop password rotation onboarding offboarding benefits insurance pension travel hotel flight "
    "approval manager budget forecast quarter audit compliance gdpr retention backup restore "
    "kubernetes cluster database migration latency outage escalation ticket priority sla"
).split()


def make_chunks(
    n: int, rng: random.Random, *, chunks_per_document: int = 20, texts: Sequence[str] | None = None
) -> list[ChunkRecord]:
    """Realistic-looking chunks (120-180 words, an error code) of documents with ~8 tags, 2 tenants;
    with `texts`, those texts (the i-th chunk gets texts[i]) under the same documents, tags and tenants."""
    chunks = []
    doc = ""
    tags: tuple[str, ...] = (PUBLIC_TAG,)
    tenant = "default"
    for i in range(n):
        if i % chunks_per_document == 0:
            doc = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            tags = tuple(rng.sample(TAGS[1:], k=rng.choice([1, 1, 2]))) if rng.random() > 0.2 else (PUBLIC_TAG,)
            tenant = "default" if rng.random() > 0.1 else "acme"
        words = rng.choices(WORDS, k=rng.randint(120, 180))
        code = f"ERR-{rng.randint(1000, 9999)}"
        index = i % chunks_per_document
        text = texts[i] if texts is not None else f"Section {index}: {code} " + " ".join(words) + "."
        chunks.append(
            ChunkRecord(
                document_id=doc,
                chunk_index=index,
                document_name=f"doc-{i // chunks_per_document}.pdf",
                chunk_text=text,
                tags=tags,
                tenant_id=tenant,
                page_number=index // 3 + 1,
                section=f"Section {index}",
                token_count=len(words) + 4,
            )
        )
    return chunks


def make_queries(n: int, rng: random.Random) -> list[tuple[str, list[str]]]:
    """(question, user tags): 3-8 corpus words, every fourth with an error code; 0-2 tags each."""
    out = []
    for i in range(n):
        query = " ".join(rng.choices(WORDS, k=rng.randint(3, 8)))
        if i % 4 == 0:
            query += f" ERR-{rng.randint(1000, 9999)}"
        out.append((query, rng.sample(TAGS[1:], k=rng.randint(0, 2))))
    return out


def tie_aware_recall(found: Sequence[float], exact: Sequence[float]) -> float:
    """Recall of a search against an exact one, from their scores (exact: best first, not empty):
    a found hit scoring at least the exact last one counts, so ties at the cut are not misses."""
    floor = exact[-1] - 1e-6
    return min(len(exact), sum(1 for score in found if score >= floor)) / len(exact)


def run_bench_module(module: str, *args: str, timeout: float) -> dict:
    """`python -m module args...` in a fresh process (its memory its own); the JSON object on its
    last line. RuntimeError with the last line of its stderr when it fails."""
    import json
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError((done.stderr.strip().splitlines() or ["no output"])[-1])
    return json.loads(done.stdout.strip().splitlines()[-1])


def start_fake_llm(log: Path):
    """The fake Ollama (`ragchat.bench.fake_llm`) in a process of its own: (process, its URL). The
    process reads its commands on stdin; RuntimeError when it does not start."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(
        [sys.executable, "-m", "ragchat.bench.fake_llm", "--log", str(log)],
        cwd=repo,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line.startswith("URL "):
        raise RuntimeError(f"fake Ollama did not start: {line!r}")
    return process, line.split(" ", 1)[1]


def postgres_url(url: str, database: str) -> str:
    """`url` (postgres://user@host:port/name) with `database` in place of its database: the same server."""
    return url.rsplit("/", 1)[0] + "/" + database


class PostgresUnreachable(RuntimeError):
    """The PostgreSQL server did not take the connection (the message is psycopg's)."""


def create_scratch_database(admin_url: str, prefix: str, *, connect_timeout: float = 3) -> str:
    """CREATE a database of a name no other run uses (`{prefix}_{pid}_{6 hex digits}`) on the server
    of `admin_url` (a database there to connect to, not the new one); its name. PostgresUnreachable
    when the server does not take the connection."""
    import psycopg

    try:
        admin = psycopg.connect(admin_url, autocommit=True, connect_timeout=connect_timeout)
    except Exception as e:
        raise PostgresUnreachable(str(e)) from e
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_database(admin_url: str, name: str, *, connect_timeout: float = 3) -> None:
    """DROP the database `name` of the server of `admin_url`, WITH (FORCE): the connections still
    open to it (a server, a worker, a killed process's) are terminated first."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True, connect_timeout=connect_timeout) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def scratch_database(admin_url: str, prefix: str, *, connect_timeout: float = 3) -> Iterator[str]:
    """A scratch PostgreSQL database (create_scratch_database) for the block: its URL; dropped at
    the end (drop_database), whatever the block raised."""
    name = create_scratch_database(admin_url, prefix, connect_timeout=connect_timeout)
    try:
        yield postgres_url(admin_url, name)
    finally:
        drop_database(admin_url, name, connect_timeout=connect_timeout)


def pct(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0-1); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def peak_rss_mb() -> float:
    """This process's peak resident set size (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def process_peak_rss_mb(pid: int) -> float | None:
    """Another process's peak resident set size (VmHWM), while it is alive."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def process_family(pid: int) -> list[int]:
    """The process and its children (the server's embedding process: onnx_model.ModelProcess)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            children.append(int(stat.parent.name))
    return [pid, *children]


def family_total(measure, pid: int) -> float | None:
    """`measure` (process_cpu_seconds, process_rss_mb, process_peak_rss_mb) summed over the process
    and its children; None when the process itself cannot be read."""
    values = [measure(p) for p in process_family(pid)]
    if values[0] is None:
        return None
    return sum(v for v in values if v is not None)


def process_cpu_seconds(pid: int) -> float | None:
    """Another process's user + system CPU time so far (from /proc/<pid>/stat), in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_rss_mb(pid: int) -> float | None:
    """Another process's current resident set size (VmRSS)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None
