"""Write one archive of the instance: database, vector store, originals (ragchat/management/backup.py).

    manage.py backup DEST        DEST: an archive name (….tar.gz) or a folder to write one into

In embedded mode (no QDRANT_URL) run it while the server is stopped: the store opens in one process only.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from ragchat import runtime
from ragchat.management.backup import HOLD_WAIT_SECONDS, BackupError, backup
from ragchat.services.errors import VectorStoreError


class Command(BaseCommand):
    help = "Back up the database, the vector store and the uploaded originals into one archive."

    def add_arguments(self, parser):
        parser.add_argument("destination", help="an archive name ending in .tar.gz, or a folder to write one into")
        parser.add_argument(
            "--wait",
            type=float,
            default=HOLD_WAIT_SECONDS,
            help="seconds to wait for the documents being indexed to finish before giving up (default %(default)g)",
        )

    def handle(self, *args, destination, wait, **options):
        try:
            archive, manifest = backup(destination, wait=wait)
        except VectorStoreError as e:
            raise CommandError(
                f"the vector store cannot be opened ({e}); in embedded mode stop the server first: "
                "one process at a time may hold it"
            ) from e
        except BackupError as e:
            raise CommandError(str(e)) from e
        finally:
            runtime.reset()  # releases the embedded store for the server that starts next
        counts = manifest["counts"]
        self.stdout.write(
            f"Backup written to {archive}: {counts['documents']} documents, {counts['chunks']} chunks "
            f"({manifest['vector_store']['embedding_model']}), {counts['sessions']} chats with {counts['messages']} "
            f"messages, {counts['users']} users, {manifest['media_files']} original files."
        )
