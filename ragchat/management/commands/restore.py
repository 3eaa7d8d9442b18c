"""Restore an archive written by `manage.py backup` (ragchat/management/backup.py).

    manage.py restore ARCHIVE [--replace]

Refuses, before changing anything: another embedding model or dimension than configured, a newer
schema than this code's, the other database engine, or a target holding data without --replace.
In embedded mode run it while the server is stopped.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from documents.management.commands._indexing import close_vector_store
from ragchat.management.backup import BackupError, restore
from ragchat.services.errors import VectorStoreError


class Command(BaseCommand):
    help = "Restore the database, the vector store and the originals from a backup archive."

    def add_arguments(self, parser):
        parser.add_argument("archive")
        parser.add_argument("--replace", action="store_true", help="overwrite an instance that already holds data")

    def handle(self, *args, archive, replace, **options):
        done = None
        try:
            done = restore(archive, replace=replace)
        except VectorStoreError as e:
            raise CommandError(
                f"the vector store cannot be opened ({e}); in embedded mode stop the server first"
            ) from e
        except BackupError as e:
            raise CommandError(str(e)) from e
        finally:
            close_vector_store(settle=done is not None)  # the embedded store settled for fast searches
        expected, found = done["manifest"]["counts"], done["counts"]
        lines = [
            f"{key}: {found[key]} (backup: {expected[key]})"
            for key in ("documents", "chunks", "sessions", "messages", "users")
        ]
        self.stdout.write(f"Restored {archive}:\n  " + "\n  ".join(lines))
        if any(found[key] != expected[key] for key in expected):
            raise CommandError("the restored counts differ from the backup's (above)")
