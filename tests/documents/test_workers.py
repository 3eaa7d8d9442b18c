"""The ingestion workers' sweep (documents/workers.py) on the real django-tasks-db tables: a dead
worker's task is failed and its document resumed; a live worker's, or a plain db_worker's, is left
alone; a document that lost its worker MAX_RESUMES times is failed, not looped."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from documents import services
from documents.models import Document, IngestionWorker
from documents.tasks import ingestion_enqueue
from documents.workers import MAX_RESUMES, STAGE_RESUMED, WORKER_LOST, sweep_lost_tasks
from ragchat.evaluation.docgen import make_text

pytestmark = pytest.mark.django_db(transaction=True)


def claimed_document(people, tags, *, name: str, worker: str, beat_seconds_ago: float | None):
    """A document whose task `worker` claimed and started (status processing), as db_worker does."""
    from django_tasks_db.models import DBTaskResult

    document = services.document_create(
        user=people["owner"], data=make_text([f"About {name}."]), filename=f"{name}.txt", tags=[tags["finance"]]
    )
    ingestion_enqueue(document.id)
    task = DBTaskResult.objects.get(args_kwargs__args=[str(document.id)], status="READY")
    task.claim(worker)
    Document.objects.filter(pk=document.pk).update(status=Document.Status.PROCESSING, stage="Reading the file")
    if beat_seconds_ago is not None:
        IngestionWorker.objects.update_or_create(
            worker_id=worker, defaults={"heartbeat_at": timezone.now() - timedelta(seconds=beat_seconds_ago)}
        )
    return document


def test_sweep_resumes_only_what_dead_workers_held(settings, people, tags, vectors):
    from django_tasks_db.models import DBTaskResult

    settings.RAGCHAT_INGEST_BACKEND = "tasks"
    dead = claimed_document(people, tags, name="dead", worker="w-dead", beat_seconds_ago=120)
    alive = claimed_document(people, tags, name="alive", worker="w-alive", beat_seconds_ago=1)
    plain = claimed_document(people, tags, name="plain", worker="plain-db-worker", beat_seconds_ago=None)

    result = sweep_lost_tasks(stale_seconds=60)
    assert result.lost_tasks == 1 and result.resumed == [str(dead.id)]
    assert sweep_lost_tasks(stale_seconds=60).lost_tasks == 0  # a second sweep finds nothing more
    dead.refresh_from_db()
    assert (dead.status, dead.stage) == (Document.Status.QUEUED, STAGE_RESUMED)
    lost = DBTaskResult.objects.get(args_kwargs__args=[str(dead.id)], status="FAILED")
    assert lost.exception_class_path == WORKER_LOST and "w-dead" in lost.traceback
    for kept in (alive, plain):
        kept.refresh_from_db()
        assert kept.status == Document.Status.PROCESSING
        assert DBTaskResult.objects.get(args_kwargs__args=[str(kept.id)]).status == "RUNNING"

    # The resumed document is indexed by the next worker run, whole.
    call_command("ingest_worker", "--batch", "--no-startup-delay", stdout=io.StringIO(), stderr=io.StringIO())
    dead.refresh_from_db()
    assert dead.status == Document.Status.READY, dead.error
    assert vectors.count(document_id=str(dead.id)) == dead.chunk_count == 1
    assert not IngestionWorker.objects.exclude(worker_id__in=["w-dead", "w-alive"]).exists()  # a clean stop leaves


def test_a_document_that_keeps_killing_workers_fails_instead_of_looping(settings, people, tags):
    from django_tasks_db.models import DBTaskResult

    settings.RAGCHAT_INGEST_BACKEND = "tasks"
    document = claimed_document(people, tags, name="poison", worker="w-1", beat_seconds_ago=120)
    for attempt in range(2, MAX_RESUMES + 1):
        assert sweep_lost_tasks(stale_seconds=60).resumed == [str(document.id)]
        task = DBTaskResult.objects.get(args_kwargs__args=[str(document.id)], status="READY")
        task.claim(f"w-{attempt}")
        Document.objects.filter(pk=document.pk).update(status=Document.Status.PROCESSING)
        IngestionWorker.objects.create(worker_id=f"w-{attempt}", heartbeat_at=timezone.now() - timedelta(minutes=5))
    result = sweep_lost_tasks(stale_seconds=60)
    assert result.failed == [str(document.id)] and not result.resumed
    document.refresh_from_db()
    assert document.status == Document.Status.FAILED
    assert f"stopped {MAX_RESUMES} times" in document.error and "Retry" in document.error
    assert not DBTaskResult.objects.filter(status__in=["READY", "RUNNING"]).exists()


def test_a_worker_stopped_by_a_second_signal_leaves_nothing_processing(settings, people, tags):
    """db_worker records the task it was running as failed with SystemExit; the document is resumed."""
    from django_tasks_db.models import DBTaskResult

    settings.RAGCHAT_INGEST_BACKEND = "tasks"
    document = claimed_document(people, tags, name="stopped", worker="w-live", beat_seconds_ago=0)
    task = DBTaskResult.objects.get(args_kwargs__args=[str(document.id)])
    task.set_failed(SystemExit(1))
    result = sweep_lost_tasks(stale_seconds=60)
    assert result.resumed == [str(document.id)]
    document.refresh_from_db()
    assert document.status == Document.Status.QUEUED
    task.refresh_from_db()
    assert task.exception_class_path == WORKER_LOST and "interrupted by a signal" in task.traceback
    assert sweep_lost_tasks(stale_seconds=60).lost_tasks == 0  # once only
    assert DBTaskResult.objects.filter(args_kwargs__args=[str(document.id)], status="READY").count() == 1
