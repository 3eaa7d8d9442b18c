"""SQLite under concurrent writers: several processes, each with several threads, write chat messages
(the same transactions the chat does: insert + session update, partial saves) and document rows at
once into one FILE database with the project's own settings (WAL, busy timeout, IMMEDIATE
transactions). No "database is locked" may surface, and every write must be there.

Runs in subprocesses on its own SQLite file, so it proves the same thing in the PostgreSQL run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROCESSES, THREADS, WRITES = 4, 4, 25

WRITER = r"""
import os, sys, threading, uuid
import django
django.setup()
from django.db import connection
from chat import services
from chat.models import ChatSession
from documents.models import Document

errors = []
session = ChatSession.objects.get(title="load")

def work(worker):
    try:
        for i in range(int(sys.argv[2])):
            message = services.message_create_user(session=session, content=f"{sys.argv[1]}-{worker}-{i}")
            draft = services.message_create_draft(reply_to=message)
            services.message_save_partials(contents={draft.pk: "partial " * i})
            Document.objects.create(title=f"doc {worker} {i}", original_filename="x.txt", file="originals/x.txt",
                                    content_hash=uuid.uuid4().hex, status="ready")
            list(ChatSession.objects.filter(pk=session.pk))  # readers alongside the writers
    except Exception as e:
        errors.append(f"{type(e).__name__}: {e}")
    finally:
        connection.close()

threads = [threading.Thread(target=work, args=(n,)) for n in range(int(sys.argv[3]))]
for t in threads: t.start()
for t in threads: t.join()
for e in errors: print("ERROR", e, file=sys.stderr)
sys.exit(1 if errors else 0)
"""


def test_concurrent_writers_on_a_file_sqlite_database(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "QDRANT_URL")}
    env.update(RAGCHAT_DATA_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="ragchat.settings", LOG_LEVEL="ERROR")
    python = [sys.executable, "manage.py"]
    subprocess.run([*python, "migrate", "-v0"], cwd=ROOT, env=env, check=True, capture_output=True)
    subprocess.run(
        [
            *python,
            "shell",
            "-c",
            "from ragchat.models import User; from chat.models import ChatSession; "
            "ChatSession.objects.create(owner=User.objects.create_user('w', password='pw-w-12345'), title='load')",
        ],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    assert (tmp_path / "db.sqlite3").exists()
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, f"p{n}", str(WRITES), str(THREADS)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(PROCESSES)
    ]
    results = [(w.wait(timeout=240), *w.communicate()) for w in writers]
    for code, _out, err in results:
        assert "database is locked" not in err
        assert code == 0, err[-2000:]
    counted = (
        subprocess.run(
            [
                *python,
                "shell",
                "-c",
                "from chat.models import Message; from documents.models import Document; "
                "print(Message.objects.filter(role='user').count(), Message.objects.filter(role='assistant').count(), "
                "Document.objects.count(), Message.objects.values('content').distinct().count())",
            ],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .splitlines()[-1]
        .split()
    )
    total = PROCESSES * THREADS * WRITES
    assert [int(n) for n in counted[:3]] == [total, total, total]
    journal = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('pragma journal_mode').fetchone()[0])",
            str(tmp_path / "db.sqlite3"),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert journal == "wal"
