"""A separate ingestion worker SIGKILLed mid-ingestion: the next worker resumes the document by itself
(documents/workers.py), no operator command. Real `manage.py ingest_worker` processes on a file SQLite
database, and on a PostgreSQL database of its own when TEST_POSTGRES_URL's server is reachable, with
the embedded store (one worker at a time holds it, as it must); the fake Ollama serves
embeddings slowly enough that the kill lands between two batches."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys

import pytest

from documents.workers import WORKER_LOST
from ragchat.evaluation.docgen import lorem_sentences, make_text
from tests.browser.conftest import ROOT, LiveServer
from tests.ops.conftest import slow_ingestion_server
from tests.ops.test_restart import indexed, stored_vectors, wait_for


def start_worker(site: LiveServer, name: str) -> subprocess.Popen:
    log = open(site.data_dir / f"{name}.log", "w")
    return subprocess.Popen(
        [sys.executable, "manage.py", "ingest_worker", "--no-startup-delay", "--interval", "0.2", "--worker-id", name],
        cwd=ROOT,
        env=site.env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


DOCUMENTS = "select id, original_filename, status, stage, error, chunk_count from documents_document"
TASKS = "select status, worker_ids, exception_class_path from django_tasks_database_dbtaskresult"


class Database:
    """Reads the workers' database from the test: a SQLite file or a PostgreSQL database."""

    def __init__(self, url: str) -> None:
        self.url = url

    def rows(self, sql: str) -> list[dict]:
        if self.url.startswith("sqlite:///"):
            with sqlite3.connect(f"file:{self.url[len('sqlite:///') :]}?mode=ro", uri=True, timeout=10) as conn:
                conn.row_factory = sqlite3.Row
                return [dict(r) for r in conn.execute(sql)]
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(self.url, row_factory=dict_row) as conn:
            return [dict(r) for r in conn.execute(sql)]

    def documents(self) -> dict[str, dict]:
        return {r["original_filename"]: r for r in self.rows(DOCUMENTS)}

    def tasks(self) -> list[dict]:
        rows = self.rows(TASKS)
        for r in rows:  # a JSON column: text on SQLite, decoded on PostgreSQL
            r["worker_ids"] = json.loads(r["worker_ids"]) if isinstance(r["worker_ids"], str) else r["worker_ids"]
        return rows


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path, scratch_postgres):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'db.sqlite3'}"
    return scratch_postgres("ragchat_workers")


def test_worker_killed_mid_ingestion_is_resumed_by_the_next_worker(tmp_path, slow_embeddings, database_url):
    site = slow_ingestion_server(
        tmp_path,
        slow_embeddings,
        {
            "RAGCHAT_INGEST_BACKEND": "tasks",
            "RAGCHAT_WORKER_HEARTBEAT_SECONDS": "0.5",
            "RAGCHAT_WORKER_STALE_SECONDS": "3",
            "DATABASE_URL": database_url,
            "DB_CONN_MAX_AGE": "0",
        },
    )
    db = Database(database_url)
    site.manage("migrate", "-v0")
    site.create_user("root", "pw-root-123", superuser=True)
    site.create_tag("finance", "Finance", owner="root")
    text = make_text(lorem_sentences(200, seed=11)).decode()
    site.shell(
        "import json\nfrom ragchat.models import User\nfrom documents import services\n"
        "from documents.models import Tag\nfrom documents.tasks import ingestion_enqueue\n"
        f"d = services.document_create(user=User.objects.get(username='root'), data=json.loads({json.dumps(json.dumps(text))}).encode(),"
        " filename='long.txt', tags=[Tag.objects.get(slug='finance')])\n"
        "print(ingestion_enqueue(d.id))"
    )
    first = start_worker(site, "worker-a")
    second = None
    try:
        wait_for(lambda: 8 <= indexed(db.documents().get("long.txt")) < 40, timeout=90, what="a few batches")
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        before = db.documents()["long.txt"]
        assert before["status"] == "processing"  # what django-tasks-db alone would leave for ever
        assert [t["status"] for t in db.tasks()] == ["RUNNING"]

        # The next worker (a supervisor's restart) resumes it once worker-a's heartbeat is stale.
        slow_embeddings.first_token_delay(0)
        second = start_worker(site, "worker-b")
        after = wait_for(
            lambda: (d := db.documents()["long.txt"]) and d["status"] in ("ready", "failed") and d,
            timeout=90,
            what="long.txt indexed by worker-b",
        )
        assert after["status"] == "ready", after
        # The document is ready inside the task; the task row is marked finished just after it returns.
        rows = wait_for(
            lambda: (r := db.tasks()) and all(t["status"] != "RUNNING" for t in r) and r,
            timeout=30,
            what="worker-b's task row finished",
        )
        assert sorted((r["status"], r["exception_class_path"]) for r in rows) == [
            ("FAILED", WORKER_LOST),
            ("SUCCESSFUL", ""),
        ]
        assert any(r["worker_ids"] == ["worker-b"] for r in rows if r["status"] == "SUCCESSFUL")
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=15)
    # Indexed whole: every chunk once (the partial ones of worker-a replaced, none left over).
    shown = site.shell("from documents.models import Document\nprint('ID', Document.objects.get().id)")
    document_id = shown.split("ID ", 1)[1].split()[0]
    assert stored_vectors(site, document_id) == after["chunk_count"] > 40
    log = (tmp_path / "worker-b.log").read_text()
    assert "ingestion resumed after a worker died" in log, log[-2000:]
