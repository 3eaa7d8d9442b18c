"""Fail (and un-index) documents left processing by a dead ingester; start the queued ones again.

    manage.py recover_ingestion [--older-than-minutes 30]

The server does this by itself on start with the in-process backend (documents/recovery.py). With
`db_worker` processes, run it when no worker is alive, or with --older-than-minutes longer than any
ingestion takes. In embedded mode (no QDRANT_URL) run it while the server is stopped.
"""

from __future__ import annotations

from datetime import timedelta

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand
from django.utils import timezone

from documents.recovery import documents_recover_interrupted
from documents.tasks import ingestion_enqueue


class Command(BaseCommand):
    help = "Recover documents whose ingestion was interrupted (crash, restart)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--older-than-minutes",
            type=float,
            default=0.0,
            help="only documents not touched for this long (default: all)",
        )

    def handle(self, *args, older_than_minutes, **options):
        started_before = timezone.now() - timedelta(minutes=older_than_minutes)
        result = async_to_sync(documents_recover_interrupted)(started_before=started_before)
        for document_id in result.requeued:
            ingestion_enqueue(document_id)
        self.stdout.write(
            f"{len(result.failed)} interrupted documents marked failed (retryable), "
            f"{len(result.requeued)} queued documents started again, {result.purged} cleanups done."
        )
