"""Scale-out path: ingestion enqueued through django-tasks' database backend and run by `db_worker`."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from documents import services
from documents.models import Document
from documents.tasks import ingestion_enqueue
from ragchat.evaluation.docgen import make_text

pytestmark = pytest.mark.django_db(transaction=True)


def test_enqueue_then_db_worker_indexes(settings, people, tags, vectors, rag_runtime):
    from django_tasks_db.models import DBTaskResult

    settings.RAGCHAT_INGEST_BACKEND = "tasks"  # the one setting: django-tasks' own needs no change
    document = services.document_create(
        user=people["owner"], data=make_text(["Queued for a worker."]), filename="worker.txt", tags=[tags["finance"]]
    )
    assert ingestion_enqueue(document.id) == "worker"
    document.refresh_from_db()
    assert document.status == Document.Status.QUEUED
    assert DBTaskResult.objects.filter(queue_name="ingestion").count() == 1
    call_command(
        "db_worker",
        "--batch",
        "--queue-name",
        "ingestion",
        "--no-startup-delay",
        "--no-reload",
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )
    document.refresh_from_db()
    assert document.status == Document.Status.READY, document.error
    assert vectors.count(document_id=str(document.id)) == document.chunk_count == 1
