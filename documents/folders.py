"""Synced folders: a folder on disk mirrored into the index.

`folder_sync()` walks the folder: a new file becomes a document (source "folder", its absolute path
kept), a changed file (other bytes than its document's) becomes that document's new version, an
unchanged one is not touched at all (no parse, no embedding, no write), and with `mirror` a document
whose file is gone is deleted with its chunks. Running it twice in a row changes nothing the
second time. Every document goes through the one pipeline (`services.document_ingest_sync`).

A folder that does not exist is refused before anything is looked at, so an unmounted share never
empties the index. `configured_folders()` reads RAGCHAT_SYNC_FOLDERS for the schedule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from documents import services
from documents.models import Document, Tag


class FolderRefused(Exception):
    """The folder cannot be synced (missing, not a folder); nothing was changed."""


@dataclass
class FolderSummary:
    files: int = 0
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    removed: int = 0
    duplicate: int = 0
    refused: int = 0
    failed: int = 0
    chunks: int = 0
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"{self.files} files: {self.added} added, {self.changed} changed, {self.unchanged} unchanged, "
            f"{self.removed} removed ({self.chunks} chunks indexed); {self.duplicate} already present, "
            f"{self.refused} refused, {self.failed} failed."
        )


def folder_files(root: Path) -> list[Path]:
    if not root.is_dir():
        raise FolderRefused(f"{root} is not a folder (missing or not mounted?); nothing was changed.")
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )


def folder_sync(
    root: Path | str,
    *,
    tags: Sequence[Tag],
    uploader,
    mirror: bool = True,
    on_file: Callable[[Path], None] | None = None,
    files: list[Path] | None = None,
) -> FolderSummary:
    root = Path(root).resolve()
    files = folder_files(root) if files is None else files
    summary = FolderSummary(files=len(files))
    tenant_id = uploader.tenant_id
    known = {
        d.source_path: d
        for d in Document.objects.filter(
            tenant_id=tenant_id, source_kind=Document.Source.FOLDER, source_path__startswith=f"{root}/"
        ).prefetch_related("tags")
    }
    tag_ids = sorted(t.pk for t in tags)
    for path in files:
        if on_file is not None:
            on_file(path)
        _sync_one(path.resolve(), known.get(str(path.resolve())), tags, tag_ids, uploader, summary)
    if mirror:
        present = {str(p.resolve()) for p in files}
        for source_path, document in sorted(known.items()):
            if source_path not in present:
                try:
                    services.document_delete(document=document, reason="folder sync: the file is gone")
                except Exception as e:  # the store is down: the row stays, the next sync retries
                    summary.failed += 1
                    summary.problems.append(f"could not remove {source_path}: {e}")
                else:
                    summary.removed += 1
    return summary


def _sync_one(path: Path, document: Document | None, tags, tag_ids, uploader, summary: FolderSummary) -> None:
    try:
        data = path.read_bytes()
    except OSError as e:
        summary.refused += 1
        summary.problems.append(f"refused {path}: cannot be read ({e.strerror or e})")
        return
    if document is not None:
        same_bytes = services.content_hash(data) == document.content_hash
        same_tags = sorted(t.pk for t in document.tags.all()) == tag_ids
        if same_bytes and same_tags and document.status == Document.Status.READY:
            summary.unchanged += 1
            return
        try:
            if not same_bytes:
                services.document_replace_file(document=document, data=data, filename=path.name)
            else:
                document.tags.set(tags)
                services.document_requeue(document=document)
        except services.UploadRefused as e:
            summary.refused += 1
            summary.problems.append(f"refused {path}: {e}")
            return
        _ingest(document, path, summary, counter="changed")
        return
    try:
        document = services.document_create(
            user=uploader,
            data=data,
            filename=path.name,
            tags=tags,
            check_permissions=False,
            source={"source_kind": Document.Source.FOLDER, "source_path": str(path)},
        )
    except services.DuplicateDocument as e:
        summary.duplicate += 1
        summary.problems.append(f"skipped {path}: {e}")
        return
    except services.UploadRefused as e:
        summary.refused += 1
        summary.problems.append(f"refused {path}: {e}")
        return
    _ingest(document, path, summary, counter="added")


def _ingest(document: Document, path: Path, summary: FolderSummary, *, counter: str) -> None:
    result = services.document_ingest_sync(document.id)
    if result.status == Document.Status.READY:
        setattr(summary, counter, getattr(summary, counter) + 1)
        summary.chunks += result.chunk_count
    else:
        summary.failed += 1
        summary.problems.append(f"failed {path}: {result.error}")


def configured_folders() -> list[tuple[Path, list[str]]]:
    """RAGCHAT_SYNC_FOLDERS ("PATH=tag,tag;PATH2=tag") as (folder, tag slugs) pairs."""
    found = []
    for entry in settings.RAGCHAT_SYNC_FOLDERS.split(";"):
        path, _, slugs = entry.strip().rpartition("=")
        if path.strip():
            found.append((Path(path.strip()), [s.strip() for s in slugs.split(",") if s.strip()]))
    return found
