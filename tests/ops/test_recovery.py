"""documents.recovery in-process: what the restarted server (and `manage.py recover_ingestion`) does
with documents an earlier process left processing or queued. The real SIGKILL is test_restart.py."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.utils import timezone

from documents import services
from documents.models import Document
from documents.recovery import INTERRUPTED_MESSAGE, documents_recover_interrupted
from ragchat import runtime
from ragchat.evaluation.docgen import make_text
from ragchat.services.types import ChunkRecord

pytestmark = pytest.mark.django_db


def _document(people, tags, name: str, status: str, *, minutes_ago: float) -> Document:
    document = services.document_create(
        user=people["owner"], data=make_text([f"Text of {name}."]), filename=name, tags=[tags["finance"]]
    )
    Document.objects.filter(pk=document.pk).update(
        status=status, updated_at=timezone.now() - timedelta(minutes=minutes_ago)
    )
    return document


def _index_partially(document: Document, n: int) -> None:
    async def run():
        service = await runtime.ready_vector_service()
        await service.upsert_chunks(
            [
                ChunkRecord(
                    document_id=str(document.id),
                    chunk_index=i,
                    document_name=document.title,
                    chunk_text=f"partial chunk {i}",
                    tags=("finance",),
                )
                for i in range(n)
            ]
        )

    async_to_sync(run)()


def _count(document: Document) -> int:
    async def run():
        return await (await runtime.ready_vector_service()).count(document_id=str(document.id))

    return async_to_sync(run)()


def test_interrupted_documents_fail_without_vectors_and_queued_ones_are_listed(people, tags, rag_runtime):
    stuck = _document(people, tags, "stuck.txt", "processing", minutes_ago=5)
    waiting = _document(people, tags, "waiting.txt", "queued", minutes_ago=5)
    running = _document(people, tags, "running.txt", "processing", minutes_ago=0)  # touched after the start
    _index_partially(stuck, 4)
    _index_partially(running, 2)
    started = timezone.now() - timedelta(minutes=1)

    result = async_to_sync(documents_recover_interrupted)(started_before=started)

    assert result.failed == [str(stuck.id)] and result.requeued == [str(waiting.id)]
    stuck.refresh_from_db()
    assert (stuck.status, stuck.error, stuck.chunk_count) == ("failed", INTERRUPTED_MESSAGE, 0)
    assert _count(stuck) == 0
    assert Document.objects.get(pk=running.pk).status == "processing" and _count(running) == 2  # not taken
    # Retryable: requeue + ingest makes it ready.
    services.document_requeue(document=stuck)
    services.document_ingest_sync(stuck.id)
    stuck.refresh_from_db()
    assert stuck.status == "ready" and _count(stuck) == stuck.chunk_count == 1


def test_recover_ingestion_command(people, tags, rag_runtime):
    stuck = _document(people, tags, "stuck.txt", "processing", minutes_ago=40)
    waiting = _document(people, tags, "waiting.txt", "queued", minutes_ago=40)
    recent = _document(people, tags, "recent.txt", "processing", minutes_ago=1)
    _index_partially(stuck, 3)
    out = StringIO()
    call_command("recover_ingestion", "--older-than-minutes", "30", stdout=out)
    assert "1 interrupted documents marked failed" in out.getvalue()
    assert Document.objects.get(pk=stuck.pk).status == "failed" and _count(stuck) == 0
    assert Document.objects.get(pk=waiting.pk).status == "ready"  # started again (inline outside a server)
    assert Document.objects.get(pk=recent.pk).status == "processing"
