"""What only works in one process is refused at start-up when the settings say several
(ragchat/processes.py), a client of the embedded store never opens it, and answers a dead process
left streaming are closed by the process that runs every turn."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from chat import services as chat_services
from chat import turn_handover
from chat.models import Message
from ragchat import processes, runtime
from tests.browser.conftest import ROOT


@pytest.fixture
def embedded(settings):
    settings.RAG = dataclasses.replace(settings.RAG, qdrant_url="")
    settings.REDIS_URL = ""
    settings.RAGCHAT_STORE_ROLE = "own"
    settings.RAGCHAT_INGEST_BACKEND = "inprocess"
    return settings


def test_one_process_on_the_embedded_store_is_fine(embedded):
    assert processes.process_problems() == []


def test_several_processes_on_the_embedded_store_need_a_holder(embedded):
    embedded.REDIS_URL = "redis://127.0.0.1:6379/0"
    [problem] = processes.process_problems()
    assert "one process only" in problem and "RAGCHAT_STORE_ROLE=holder" in problem
    embedded.RAGCHAT_STORE_ROLE = "holder"
    assert processes.process_problems() == []
    embedded.RAGCHAT_STORE_ROLE = "client"
    assert processes.process_problems() == []


def test_several_processes_on_a_qdrant_server_need_no_roles(embedded):
    embedded.REDIS_URL = "redis://127.0.0.1:6379/0"
    embedded.RAG = dataclasses.replace(embedded.RAG, qdrant_url="http://qdrant:6333")
    assert processes.process_problems() == []
    embedded.RAGCHAT_STORE_ROLE = "holder"
    assert "leave RAGCHAT_STORE_ROLE at own" in processes.process_problems()[0]


def test_roles_need_the_redis_layer_and_a_known_name(embedded):
    embedded.RAGCHAT_STORE_ROLE = "client"
    assert "needs REDIS_URL" in processes.process_problems()[0]
    embedded.RAGCHAT_STORE_ROLE = "primary"
    assert "use one of own, holder, client" in processes.process_problems()[0]


def test_ingestion_workers_need_a_qdrant_server(embedded):
    embedded.RAGCHAT_INGEST_BACKEND = "tasks"
    [problem] = processes.process_problems()
    assert "db_worker" in problem and "QDRANT_URL" in problem
    # Other commands (a worker alone, migrate) only warn: the server is what must not start.
    assert processes.process_problems(server=False) == []
    [warning] = processes.check_processes(None)
    assert warning.id == "ragchat.W001" and warning.msg == problem
    embedded.RAG = dataclasses.replace(embedded.RAG, qdrant_url="http://qdrant:6333")
    assert processes.process_problems() == []


def _env(tmp_path, **extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "QDRANT_URL", "RAGCHAT_STORE_ROLE")}
    env.update(DJANGO_SETTINGS_MODULE="ragchat.settings", DJANGO_DEBUG="true", RAGCHAT_DATA_DIR=str(tmp_path), **extra)
    return env


def test_the_server_and_manage_py_refuse_to_start_with_a_second_embedded_store(tmp_path):
    env = _env(tmp_path, REDIS_URL="redis://127.0.0.1:6379/0", RAGCHAT_WARMUP="0")
    check = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert check.returncode != 0 and "ragchat.E001" in check.stderr and "one process only" in check.stderr
    server = subprocess.run(
        [sys.executable, "-c", "import ragchat.asgi"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert server.returncode != 0
    assert "ImproperlyConfigured: ragchat cannot start with these settings" in server.stderr
    env["RAGCHAT_STORE_ROLE"] = "client"
    fine = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert fine.returncode == 0, fine.stderr


@pytest.mark.parametrize("warm_up", ["1", "0"])
def test_a_ready_server_sets_its_start_up_heap_aside_from_the_garbage_collector(tmp_path, warm_up):
    """RAGCHAT_WARMUP=1 (how the server starts): what start-up built is frozen, so no full collection
    walks it again in the middle of a burst, and young collections run every GC_YOUNG_ALLOCATIONS.
    With 0 (tests) the process keeps Python's own collector settings."""
    env = _env(
        tmp_path, RAGCHAT_WARMUP=warm_up, EMBEDDING_BACKEND="hashing", EMBEDDING_MODEL="hashing-384", REDIS_URL=""
    )
    probe = (
        "import gc, threading, ragchat.asgi; print(gc.get_freeze_count(), *gc.get_threshold()); "
        "[t.join(60) for t in threading.enumerate() if t.name == 'ragchat-warm-up']"  # exit after the warm-up
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    frozen, *threshold = map(int, done.stdout.split())
    if warm_up == "1":
        assert frozen > 50_000  # Django, the apps and the RAG parts
        assert threshold == [runtime.GC_YOUNG_ALLOCATIONS, 10, 10]
    else:
        assert frozen == 0 and threshold[0] == 700


def test_a_client_never_opens_the_embedded_store(embedded, tmp_path):
    embedded.REDIS_URL = "redis://127.0.0.1:6379/0"
    embedded.RAGCHAT_STORE_ROLE = "client"
    embedded.RAG = dataclasses.replace(embedded.RAG, qdrant_path=str(tmp_path / "qdrant"), embedding_backend="hashing")
    runtime.reset()
    try:
        with pytest.raises(processes.StoreNotInThisProcess, match="RAGCHAT_STORE_ROLE=client"):
            asyncio.run(runtime.ready_vector_service())
        assert not (tmp_path / "qdrant").exists()
    finally:
        runtime.reset()


@pytest.mark.django_db
def test_answers_left_streaming_by_a_dead_process_are_closed(people_session):
    session, question = people_session
    partial = chat_services.message_create_draft(reply_to=question)
    Message.objects.filter(pk=partial.pk).update(content="Half an ans")
    empty = chat_services.message_create_draft(reply_to=question)
    later = chat_services.message_create_draft(reply_to=question)
    Message.objects.filter(pk=later.pk).update(created_at=timezone.now() + timedelta(minutes=5))

    assert chat_services.drafts_interrupt_stale(started_before=timezone.now()) == 2
    partial.refresh_from_db()
    empty.refresh_from_db()
    later.refresh_from_db()
    assert (partial.status, partial.content) == (Message.Status.INTERRUPTED, "Half an ans")
    assert empty.status == Message.Status.FAILED
    assert partial.error == empty.error == chat_services.MSG_PROCESS_STOPPED
    assert later.status == Message.Status.STREAMING  # begun after this process started: not touched


@pytest.mark.django_db
def test_a_session_is_busy_while_another_process_writes_its_answer(people_session, settings):
    session, question = people_session
    chat_services.message_create_draft(reply_to=question)
    settings.REDIS_URL = ""
    assert turn_handover.session_busy_sync(session.pk) is False  # one process: its registry is the truth
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    assert turn_handover.session_busy_sync(session.pk) is True


@pytest.fixture
def people_session(django_user_model):
    user = django_user_model.objects.create_user("erin", password="pw-erin-123")
    return chat_services.session_start(user=user, question="Where do contractors park?")
