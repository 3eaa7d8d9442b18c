"""Recovery of ingestion interrupted by a server restart (a crash, SIGKILL, a deploy).

With the in-process ingestion backend the server process is the only ingester, so when it starts,
a document still "processing" from before its start cannot be in progress any more: its partial
vectors are deleted and it is marked failed with a reason the uploader reads (retry is one click);
a document still "queued" never started and is simply started again. Failed documents whose
cleanup could not reach the store are purged too. The result: after a restart every document is
ready or failed-and-retryable, never half indexed.

It runs once per process, awaited on the first ASGI call (`recover_on_first_call` wraps the
application in ragchat/asgi.py): daphne has no lifespan events, and the event loop that will own
the vector store only exists once serving starts. Only documents last touched before the process
started are considered, so nothing a running ingestion touches is ever taken from it.

With the "tasks" backend (separate worker processes), or a Qdrant server (several processes may
ingest), a web server's start says nothing about the others, so this does nothing there: the
workers (`manage.py ingest_worker`) resume what a dead worker held by themselves, from heartbeats
(documents/workers.py); `manage.py recover_ingestion --older-than-minutes N` stays the tool for
plain `db_worker` processes, which give no heartbeat.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils import timezone

from documents.models import Document
from documents.services import STAGE_CLEANUP_PENDING, broadcast_document, documents_purge_failed_vectors

logger = logging.getLogger(__name__)

INTERRUPTED_MESSAGE = "Indexing was interrupted by a server restart; nothing of it was kept. Retry to index it."


@dataclass
class RecoveryResult:
    failed: list[str] = field(default_factory=list)  # were processing: vectors removed, now failed
    requeued: list[str] = field(default_factory=list)  # were queued: to be started again
    purged: int = 0  # failed documents whose pending vector cleanup was done


async def documents_recover_interrupted(*, started_before: datetime) -> RecoveryResult:
    """Fail (and un-index) documents left processing before `started_before`; list the queued ones.

    The caller starts the queued ones again (ingestion_enqueue). A vector store that is down leaves
    the failed documents marked STAGE_CLEANUP_PENDING: the next ingestion purges them.
    """
    from ragchat import runtime

    result = RecoveryResult()
    stuck = Document.objects.filter(status=Document.Status.PROCESSING, updated_at__lt=started_before)
    async for document in stuck:
        stage = "Failed"
        try:
            vectors = await runtime.ready_vector_service()
            await vectors.delete_document(document.document_id, tenant_id=document.tenant_id)
        except Exception as e:  # the store is down too: the row says failed, cleanup stays pending
            logger.error("recovery: could not remove partial vectors of %s: %s", document.id, e)
            stage = STAGE_CLEANUP_PENDING
        updated = await Document.objects.filter(pk=document.pk, status=Document.Status.PROCESSING).aupdate(
            status=Document.Status.FAILED,
            stage=stage,
            progress=0,
            chunk_count=0,
            error=INTERRUPTED_MESSAGE,
            updated_at=timezone.now(),
        )
        if updated:
            result.failed.append(document.document_id)
            document.status = Document.Status.FAILED
            await broadcast_document(document)
    queued = Document.objects.filter(status=Document.Status.QUEUED, updated_at__lt=started_before)
    result.requeued = [str(pk) async for pk in queued.values_list("pk", flat=True)]
    if await Document.objects.filter(status=Document.Status.FAILED, stage=STAGE_CLEANUP_PENDING).aexists():
        try:
            result.purged = await documents_purge_failed_vectors()
        except Exception as e:
            logger.error("recovery: vector store still unavailable, cleanup stays pending: %s", e)
    if result.failed or result.requeued or result.purged:
        logger.warning(
            "ingestion recovered after a restart",
            extra={
                "event": "ingestion_recovered",
                "failed": len(result.failed),
                "requeued": len(result.requeued),
                "purged": result.purged,
            },
        )
    return result


def recover_on_first_call(application):
    """Wrap the ASGI application: the first call (HTTP or websocket) first runs the recovery once.

    Every call also notes the loop it is served on: sync views hand background ingestion to it.
    """
    from documents.tasks import note_server_loop

    started_at = timezone.now()
    state = {"done": False}

    async def app(scope, receive, send):
        note_server_loop()
        if not state["done"] and scope.get("type") in ("http", "websocket"):
            state["done"] = True  # set before awaiting: concurrent first calls do not run it twice
            await _recover(started_at)
        return await application(scope, receive, send)

    return app


async def _recover(started_at: datetime) -> None:
    # Only where this process is surely the one ingester: in-process ingestion on the embedded store
    # (which one process alone can open). With QDRANT_URL other processes may be ingesting.
    # A client of the embedded store (ragchat/processes.py) is none: the holder is.
    from ragchat import processes

    single_ingester = (
        settings.RAGCHAT_INGEST_BACKEND == "inprocess" and not settings.RAG.qdrant_url and processes.opens_store()
    )
    if not single_ingester or not getattr(settings, "RAGCHAT_RECOVER_ON_START", True):
        return
    try:
        result = await documents_recover_interrupted(started_before=started_at)
    except Exception as e:  # recovery must never keep the server from serving
        logger.error("ingestion recovery failed: %s", e, extra={"event": "ingestion_recovery_failed"})
        return
    from documents.tasks import ingestion_enqueue

    for document_id in result.requeued:
        ingestion_enqueue(document_id)
    try:
        from documents.sites import crawls_fail_interrupted

        await sync_to_async(crawls_fail_interrupted, thread_sensitive=True)(started_before=started_at)
    except Exception as e:
        logger.error("crawl recovery failed: %s", e)
    if getattr(settings, "RAGCHAT_RECOVER_ON_START", True):
        from documents.schedule import start_schedule

        start_schedule()  # due re-crawls and configured folders (documents/schedule.py)
