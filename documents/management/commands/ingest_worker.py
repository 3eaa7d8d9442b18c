"""An ingestion worker that resumes what dead workers left behind (documents/workers.py).

    manage.py ingest_worker [db_worker's options]

django-tasks-db's `db_worker` on the ingestion queue, plus a heartbeat: when a worker dies mid-ingestion
(SIGKILL, out of memory, a lost machine), the others, or the next one to start, put its document back
in the queue after RAGCHAT_WORKER_STALE_SECONDS; no operator command is needed. Run as many as you like
(RAGCHAT_INGEST_BACKEND=tasks; the embedded store allows one process, so several need QDRANT_URL).
"""

from __future__ import annotations

from django_tasks_db.management.commands.db_worker import Command as DbWorkerCommand

from documents.workers import INGESTION_QUEUE, Heartbeat


class Command(DbWorkerCommand):
    help = "Run an ingestion worker (db_worker on the ingestion queue) that resumes work lost by dead workers."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.set_defaults(queue_name=INGESTION_QUEUE, reload=False)

    def handle(self, *args, **options):
        beat = Heartbeat(options["worker_id"])
        beat.start()
        try:
            super().handle(*args, **options)
        finally:
            beat.stop()
