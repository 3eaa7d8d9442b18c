"""Ingest every file of a folder (recursively) with a progress bar and a final summary.

    manage.py ingest_folder ./docs --tag finance --tag public [--user alice] [--tenant default]

`sync_folder` without the mirror: files whose documents exist and are unchanged are left alone,
changed ones re-indexed, and nothing is removed. Runs ingestion in this process, so in embedded
mode run it while the server is stopped.
"""

from __future__ import annotations

from documents.folders import FolderSummary
from documents.management.commands.sync_folder import Command as SyncFolderCommand


class Command(SyncFolderCommand):
    help = "Ingest every file of a folder into the index, with the given tags (sync_folder without removals)."
    mirror = False

    def summary_line(self, path, summary: FolderSummary, elapsed: float) -> str:
        indexed = summary.added + summary.changed
        return (
            f"{summary.files} files in {elapsed:.1f} s: {indexed} indexed ({summary.chunks} chunks), "
            f"{summary.unchanged} unchanged, {summary.duplicate} already present, {summary.refused} refused, "
            f"{summary.failed} failed."
        )
