"""Ingestion workers that recover from each other's crashes, without an operator.

With RAGCHAT_INGEST_BACKEND=tasks, `manage.py ingest_worker` runs django-tasks-db's worker loop
(`db_worker`) for the ingestion queue, plus a heartbeat thread: every RAGCHAT_WORKER_HEARTBEAT_SECONDS
it records that this worker lives (an `IngestionWorker` row) and sweeps for tasks lost by dead ones.

A task django-tasks-db marked RUNNING whose worker has not beaten for RAGCHAT_WORKER_STALE_SECONDS
belonged to a process that died (SIGKILL, out of memory, a lost machine): django-tasks-db itself
never looks at it again. The sweep marks that task failed (WORKER_LOST) and resumes its document:
back to queued and enqueued again, so a live worker indexes it whole (ingestion deletes a document's
old chunks before writing, so the partial ones go). A document whose ingestion has killed its worker
MAX_RESUMES times is failed instead (retry is one click), so a file that crashes workers cannot
loop for ever. A lost crawl run is failed with the reason, like a server restart does. A task that
django-tasks-db recorded as failed with SystemExit or KeyboardInterrupt (a worker stopped by a second
signal mid-document) is lost the same way.

Only tasks claimed by a worker that registered a heartbeat are swept: a plain `db_worker` gives no
sign of life, so its tasks are left to `manage.py recover_ingestion`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from documents.models import CrawlRun, Document, IngestionWorker
from documents.services import STAGE_CLEANUP_PENDING, broadcast_document
from ragchat import live

logger = logging.getLogger(__name__)

INGESTION_QUEUE = "ingestion"
WORKER_LOST = "documents.workers.WorkerLost"  # the exception class path a lost task is failed with
MAX_RESUMES = 3
INTERRUPTED_BY_SIGNAL = ("builtins.SystemExit", "builtins.KeyboardInterrupt")
STAGE_RESUMED = "Waiting to start again (its worker stopped)"
LOST_TOO_OFTEN = (
    "Indexing stopped {n} times because the worker running it died (out of memory?); nothing of it was kept. "
    "Retry to index it."
)
LOST_CRAWL = "The crawl was interrupted (its worker stopped); nothing was removed. Crawl again."


@dataclass
class SweepResult:
    lost_tasks: int = 0
    resumed: list[str] = field(default_factory=list)  # documents queued and enqueued again
    failed: list[str] = field(default_factory=list)  # documents that lost their worker too often
    crawls_failed: int = 0


def heartbeat(worker_id: str) -> None:
    IngestionWorker.objects.update_or_create(
        worker_id=worker_id,
        defaults={"hostname": socket.gethostname()[:255], "pid": os.getpid(), "heartbeat_at": timezone.now()},
    )


def sweep_lost_tasks(*, stale_seconds: float | None = None) -> SweepResult:
    """Fail the RUNNING tasks of workers silent for `stale_seconds` and resume their documents."""
    from django_tasks_db.compat import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    stale = settings.RAGCHAT_WORKER_STALE_SECONDS if stale_seconds is None else stale_seconds
    now = timezone.now()
    cutoff = now - timedelta(seconds=stale)
    workers = dict(IngestionWorker.objects.values_list("worker_id", "heartbeat_at"))
    result = SweepResult()
    running = DBTaskResult.objects.filter(status=TaskResultStatus.RUNNING, queue_name=INGESTION_QUEUE)
    for task_result in running:
        owner = task_result.worker_ids[-1] if task_result.worker_ids else ""
        last_beat = workers.get(owner)
        if last_beat is None or last_beat >= cutoff:
            continue  # alive, or not one of ours (a plain db_worker: recover_ingestion's job)
        taken = DBTaskResult.objects.filter(pk=task_result.pk, status=TaskResultStatus.RUNNING).update(
            status=TaskResultStatus.FAILED,
            finished_at=now,
            exception_class_path=WORKER_LOST,
            traceback=f"worker {owner} stopped beating at {last_beat.isoformat()}",
        )
        if not taken:  # another worker's sweep was first
            continue
        result.lost_tasks += 1
        args = (task_result.args_kwargs or {}).get("args") or []
        if task_result.task_path.endswith(".ingest_document_task") and args:
            _resume_document(str(args[0]), result)
        elif task_result.task_path.endswith(".crawl_site_task") and args:
            result.crawls_failed += CrawlRun.objects.filter(
                pk=args[0], status__in=[CrawlRun.Status.QUEUED, CrawlRun.Status.RUNNING]
            ).update(status=CrawlRun.Status.FAILED, stage="Failed", error=LOST_CRAWL, finished_at=now)
    # A worker stopped by a second signal (or Ctrl-C twice) records its task failed with SystemExit /
    # KeyboardInterrupt: no longer RUNNING, but its document is left processing. Lost the same way.
    interrupted = DBTaskResult.objects.filter(
        status=TaskResultStatus.FAILED, queue_name=INGESTION_QUEUE, exception_class_path__in=INTERRUPTED_BY_SIGNAL
    )
    for task_result in interrupted:
        taken = DBTaskResult.objects.filter(pk=task_result.pk, exception_class_path__in=INTERRUPTED_BY_SIGNAL).update(
            exception_class_path=WORKER_LOST, traceback=f"interrupted by a signal\n{task_result.traceback}"
        )
        args = (task_result.args_kwargs or {}).get("args") or []
        if taken and task_result.task_path.endswith(".ingest_document_task") and args:
            result.lost_tasks += 1
            _resume_document(str(args[0]), result)
    # Workers gone for a long time are forgotten (their tasks were swept above).
    IngestionWorker.objects.filter(heartbeat_at__lt=now - timedelta(seconds=max(stale * 10, 3600))).delete()
    if result.lost_tasks:
        logger.warning(
            "ingestion resumed after a worker died",
            extra={
                "event": "ingestion_worker_lost",
                "lost_tasks": result.lost_tasks,
                "resumed": len(result.resumed),
                "failed": len(result.failed),
                "crawls_failed": result.crawls_failed,
            },
        )
    return result


def _times_lost(document_id: str) -> int:
    from django_tasks_db.models import DBTaskResult

    lost = DBTaskResult.objects.filter(queue_name=INGESTION_QUEUE, exception_class_path=WORKER_LOST)
    return sum(
        1 for args_kwargs in lost.values_list("args_kwargs", flat=True) if args_kwargs.get("args") == [document_id]
    )


def _resume_document(document_id: str, result: SweepResult) -> None:
    from documents.tasks import ingest_document_task

    busy = Document.objects.filter(pk=document_id, status__in=[Document.Status.PROCESSING, Document.Status.QUEUED])
    times = _times_lost(document_id)
    if times >= MAX_RESUMES:
        # The vectors written so far go with the next ingestion's purge (STAGE_CLEANUP_PENDING).
        if busy.update(
            status=Document.Status.FAILED,
            stage=STAGE_CLEANUP_PENDING,
            progress=0,
            chunk_count=0,
            error=LOST_TOO_OFTEN.format(n=times),
            updated_at=timezone.now(),
        ):
            result.failed.append(document_id)
            _broadcast(document_id)
        return
    if busy.update(status=Document.Status.QUEUED, stage=STAGE_RESUMED, progress=0, error="", updated_at=timezone.now()):
        ingest_document_task.enqueue(document_id)
        result.resumed.append(document_id)
        _broadcast(document_id)


def _broadcast(document_id: str) -> None:
    document = Document.objects.filter(pk=document_id).first()
    if document is not None:
        live.send_soon(broadcast_document, document)


class Heartbeat:
    """The worker's sign of life and its sweep, on a daemon thread of the worker process."""

    def __init__(self, worker_id: str, *, interval: float | None = None) -> None:
        self.worker_id = worker_id
        self.interval = settings.RAGCHAT_WORKER_HEARTBEAT_SECONDS if interval is None else interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ingest-worker-heartbeat", daemon=True)

    def start(self) -> None:
        heartbeat(self.worker_id)  # before the first task is claimed: a claimed task always has a beat
        sweep_lost_tasks()
        connection.close()
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                close_old_connections()
                heartbeat(self.worker_id)
                sweep_lost_tasks()
            except Exception as e:  # a database hiccup must not end the worker's sign of life
                logger.warning("worker heartbeat failed: %s", e, extra={"event": "worker_heartbeat_failed"})
            finally:
                connection.close()

    def stop(self) -> None:
        """A clean stop: no more beats, and the row goes (its tasks finished or were interrupted
        by a signal, which django-tasks-db records as failed)."""
        self._stop.set()
        self._thread.join(timeout=self.interval + 5)
        IngestionWorker.objects.filter(worker_id=self.worker_id).delete()
