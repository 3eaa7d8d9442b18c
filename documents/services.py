"""Writes: create, replace, ingest, re-index and delete documents; tags.

Ingestion runs the core pipeline (ragchat/services/ingestion.py: parse -> chunk -> embed in batches
-> upsert); this module adds what is Django's: claiming the queued row, stage and progress written
to it after each step and pushed to the tenant's pages, purging the vectors on failure.
Integrity (R-DOC-6): one document per content hash per tenant; a new version deletes the old chunks
before the new ones go in; any failure deletes whatever was upserted and marks the document failed
with a reason the uploader can read; delete removes every vector and checks the count.

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from access import policy
from documents.ingest_hold import ingestion_running
from documents.models import PUBLIC_TAG_SLUG, Document, Tag
from documents.viewer import document_cache_clear
from ragchat import live, runtime
from ragchat.services.errors import DocumentError, EmbeddingError, VectorStoreError
from ragchat.services.ingestion import document_name, ingest_document
from ragchat.services.parsing import Attachment, ParsedDocument, detect_kind, safe_filename

logger = logging.getLogger(__name__)


# A failed document whose partial vectors could not be removed yet (the store was unreachable).
STAGE_CLEANUP_PENDING = "Failed (search index cleanup pending)"


class UploadRefused(Exception):
    """The upload is refused before anything is stored; the message is for the uploader."""


class DuplicateDocument(UploadRefused):
    def __init__(self, message: str, existing: Document) -> None:
        super().__init__(message)
        self.existing = existing


# ------------------------------------------------------------------------------------- tags


def tag_ensure_public(*, tenant_id: str) -> Tag:
    tag, _ = Tag.objects.get_or_create(
        tenant_id=tenant_id,
        slug=PUBLIC_TAG_SLUG,
        defaults={"name": "Public", "description": "Readable by every signed-in user of the tenant."},
    )
    return tag


def tag_create(*, tenant_id: str, name: str, slug: str = "", owner=None, members=(), description: str = "") -> Tag:
    tag, _ = Tag.objects.update_or_create(
        tenant_id=tenant_id,
        slug=slug or slugify(name),
        defaults={"name": name, "owner": owner, "description": description},
    )
    if members:
        tag.members.add(*members)
    return tag


# ------------------------------------------------------------------------------------- upload


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _check_upload(*, data: bytes, filename: str) -> str:
    """Cheap checks done before storing anything: size, emptiness, a type we can read."""
    name = safe_filename(filename)
    limit = settings.RAGCHAT_MAX_UPLOAD_BYTES
    if len(data) > limit:
        raise UploadRefused(
            f"{name}: this file is {len(data) / (1024 * 1024):.1f} MB; the limit is {limit / (1024 * 1024):.0f} MB."
        )
    if not data or not data.strip():
        raise UploadRefused(f"{name}: this file is empty.")
    try:
        detect_kind(data=data, filename=name)
    except DocumentError as e:
        raise UploadRefused(f"{name}: {e}") from e
    return name


MSG_NO_TAG = "Choose at least one tag: tags decide who can read the document."


def _check_tags(*, user, tags: Sequence[Tag]) -> None:
    if not tags:
        raise UploadRefused(MSG_NO_TAG)
    allowed = set(policy.uploadable_tags(user=user).values_list("pk", flat=True))
    refused = [t.name for t in tags if t.pk not in allowed]
    if refused:
        raise UploadRefused(f"You may not upload to: {', '.join(sorted(refused))}.")


def _duplicate(*, tenant_id: str, digest: str, exclude=None) -> Document | None:
    documents = Document.objects.filter(tenant_id=tenant_id, content_hash=digest)
    if exclude is not None:
        documents = documents.exclude(pk=exclude.pk)
    return documents.first()


def _duplicate_message(name: str, existing: Document) -> str:
    return f"{name}: this content already exists as “{existing.title}”; it was not indexed again."


def document_create(
    *,
    user,
    data: bytes,
    filename: str,
    tags: Sequence[Tag],
    check_permissions: bool = True,
    source: dict | None = None,
) -> Document:
    """Store an upload as a queued document (the caller enqueues ingestion). Raises UploadRefused.

    check_permissions=False is for operators' commands (sync_folder, demo_data) and for site
    sources (their owner's right to the tag was checked when the source was made), not for requests.
    `source` sets where it comes from: source_kind, source_url, source_path, site, title, chunk_metadata.
    """
    name = _check_upload(data=data, filename=filename)
    if check_permissions:
        _check_tags(user=user, tags=tags)
    elif not tags:
        raise UploadRefused(MSG_NO_TAG)
    digest = content_hash(data)
    existing = _duplicate(tenant_id=user.tenant_id, digest=digest)
    if existing is not None:
        raise DuplicateDocument(_duplicate_message(name, existing), existing)
    fields = {
        "tenant_id": user.tenant_id,
        "title": name.rsplit(".", 1)[0] or name,
        "original_filename": name,
        "content_hash": digest,
        "size": len(data),
        "uploaded_by": user,
        "status": Document.Status.QUEUED,
        "stage": "Waiting to start",
    }
    document = Document(**{**fields, **{k: v for k, v in (source or {}).items() if v}})
    try:
        with transaction.atomic():
            document.file.save(name, ContentFile(data), save=False)
            document.save()
            document.tags.set(tags)
    except IntegrityError as e:  # a concurrent upload of the same bytes won the race
        document.file.delete(save=False)
        existing = _duplicate(tenant_id=user.tenant_id, digest=digest)
        if existing is None:
            raise
        raise DuplicateDocument(_duplicate_message(name, existing), existing) from e
    return document


def document_upload(*, user, upload, tags: Sequence[Tag]) -> Document:
    """One uploaded file (a Django UploadedFile) from a request, the web page's or the API's:
    too large is refused before it is read into memory; then document_create's checks."""
    limit = settings.RAGCHAT_MAX_UPLOAD_BYTES
    if upload.size > limit:
        name = safe_filename(upload.name or "document")
        raise UploadRefused(
            f"{name}: this file is {upload.size / (1024 * 1024):.1f} MB; the limit is {limit // (1024 * 1024)} MB."
        )
    return document_create(user=user, data=upload.read(), filename=upload.name or "", tags=tags)


def delete_problem(*, document: Document) -> str | None:
    """Why a document cannot be deleted now (its indexing runs), or None: the one sentence every way
    to delete says (its page, its row in the list, the API, retiring a verified answer)."""
    if document.status == Document.Status.PROCESSING and not document.is_stale:
        return f"“{document.title}” is still being indexed. Wait until indexing finishes, then delete it."
    return None


def document_replace_file(*, document: Document, data: bytes, filename: str) -> Document:
    """A new version of the same document: same id, new original; ingestion replaces the chunks."""
    name = _check_upload(data=data, filename=filename)
    digest = content_hash(data)
    if digest == document.content_hash:
        raise UploadRefused(f"{name}: this is the same content as the current version.")
    existing = _duplicate(tenant_id=document.tenant_id, digest=digest, exclude=document)
    if existing is not None:
        raise DuplicateDocument(_duplicate_message(name, existing), existing)
    old_file = document.file.name
    document.file.save(name, ContentFile(data), save=False)
    document.original_filename = name
    document.content_hash = digest
    document.size = len(data)
    document.version += 1
    _reset_for_queue(document)
    document.save()
    if old_file and old_file != document.file.name:
        document.file.storage.delete(old_file)
    document_cache_clear(document=document)
    return document


def _reset_for_queue(document: Document) -> None:
    document.status = Document.Status.QUEUED
    document.stage = "Waiting to start"
    document.progress = 0
    document.error = ""


MSG_RENAME_BUSY = "Wait until indexing finishes, then rename."
TITLE_MAX = 200


def document_rename(*, document: Document, title: str) -> Document:
    """A person's title for a document. Citations show it once the document is re-indexed (the
    caller enqueues ingestion); later re-indexing keeps it. Raises UploadRefused."""
    title = " ".join((title or "").split())
    if not title:
        raise UploadRefused("Give the document a title.")
    if len(title) > TITLE_MAX:
        raise UploadRefused(f"A title has at most {TITLE_MAX} characters; this one has {len(title)}.")
    if document.is_busy and not document.is_stale:
        raise UploadRefused(MSG_RENAME_BUSY)
    document.title = title
    document.title_fixed = True
    _reset_for_queue(document)
    document.save(update_fields=["title", "title_fixed", "status", "stage", "progress", "error", "updated_at"])
    return document


def document_requeue(*, document: Document) -> Document:
    """Retry or re-index: back to queued (the caller enqueues ingestion)."""
    _reset_for_queue(document)
    document.save(update_fields=["status", "stage", "progress", "error", "updated_at"])
    return document


# ------------------------------------------------------------------------------------- outdated


def document_mark_outdated(*, document: Document, user, note: str = "") -> Document:
    """Mark a document outdated (issue 13, from a review item): it stays searchable, and every place
    that cites it shows a warning with the note. Marking it again updates the note and who marked it.
    The caller decides who may (routing checks the review item and that the owner may read it)."""
    document.outdated_at = document.outdated_at or timezone.now()
    document.outdated_by = user
    document.outdated_note = (note or "").strip()[:2000]
    document.save(update_fields=["outdated_at", "outdated_by", "outdated_note", "updated_at"])
    transaction.on_commit(lambda: live.send_soon(broadcast_document, document))
    logger.info("document marked outdated", extra={"event": "document_outdated", "document_id": str(document.pk)})
    return document


def document_clear_outdated(*, document: Document) -> Document:
    """Remove the outdated mark (the document was checked, or replaced by a current version)."""
    document.outdated_at = None
    document.outdated_by = None
    document.outdated_note = ""
    document.save(update_fields=["outdated_at", "outdated_by", "outdated_note", "updated_at"])
    transaction.on_commit(lambda: live.send_soon(broadcast_document, document))
    return document


# ------------------------------------------------------------------------------------- progress

ProgressReporter = Callable[[Document], Awaitable[None]]


def progress_group(tenant_id: str) -> str:
    """Channel-layer group of a tenant's document events (names allow [A-Za-z0-9_.-] only)."""
    return "documents." + re.sub(r"[^A-Za-z0-9_.-]", "_", tenant_id)[:80]


async def broadcast_document(document: Document) -> None:
    """Tell the tenant's open document pages that this row changed; consumers check access."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(
            progress_group(document.tenant_id),
            {"type": "document.changed", "document_id": str(document.id)},
        )
    except Exception as e:  # progress is a nicety; never fail ingestion over it
        logger.warning("document progress push failed: %s", e)


async def _save(document: Document, **fields) -> None:
    for key, value in fields.items():
        setattr(document, key, value)
    await sync_to_async(document.save, thread_sensitive=True)(update_fields=[*fields, "updated_at"])


# ------------------------------------------------------------------------------------- ingestion


@dataclass(frozen=True)
class IngestResult:
    document_id: str
    status: str
    chunk_count: int
    error: str = ""


def _claim(document_id: str) -> Document | None:
    """Move a queued document to processing, atomically: a second worker finds nothing to do."""
    claimed = Document.objects.filter(pk=document_id, status=Document.Status.QUEUED).update(
        status=Document.Status.PROCESSING, stage="Reading the file", progress=2, error="", updated_at=timezone.now()
    )
    if not claimed:
        return None
    document = Document.objects.get(pk=document_id)
    document._tag_slugs = sorted(document.tags.values_list("slug", flat=True))  # type: ignore[attr-defined]
    return document


def _read_original(document: Document) -> bytes:
    with document.file.open("rb") as handle:
        return handle.read()


def failure_message(error: BaseException) -> str:
    """What the uploader reads when ingestion fails."""
    if isinstance(error, DocumentError):
        return str(error)
    if isinstance(error, EmbeddingError):
        return f"The embedding model failed while indexing; try again later. ({error})"[:500]
    if isinstance(error, VectorStoreError):
        return f"The search index could not store the document; try again later. ({error})"[:500]
    if isinstance(error, FileNotFoundError):
        return "The stored original is missing; upload the file again."
    return f"Indexing failed unexpectedly ({type(error).__name__}: {error}); try again or contact an admin."[:500]


async def document_ingest(document_id: str, *, report: ProgressReporter | None = None) -> IngestResult:
    """Ingest one queued document through the core pipeline (ragchat.services.ingestion), writing
    its stage and progress to the row; on any failure, leave no vectors.

    `report` is awaited after each step with the document (stage/progress set) — by default it
    pushes the row to the tenant's open pages. An exception from it fails the ingestion like any
    other (tests use that to inject a failure after some batches were upserted).
    """
    async with ingestion_running():  # a backup waits for this document's writes, both stores
        return await _ingest(str(document_id), report=report or broadcast_document)


async def _ingest(document_id: str, *, report: ProgressReporter) -> IngestResult:
    document = await sync_to_async(_claim, thread_sensitive=True)(document_id)
    if document is None:
        current = await Document.objects.filter(pk=document_id).values_list("status", "chunk_count").afirst()
        status, chunks = current if current else ("missing", 0)
        return IngestResult(str(document_id), status, chunks)
    await report(document)
    vectors = None
    try:
        embedder = runtime.embedder()
        vectors = await runtime.ready_vector_service()
        await documents_purge_failed_vectors(vectors=vectors)  # a store that was down is back
        data = await asyncio.to_thread(_read_original, document)
        result = await ingest_document(
            data=data,
            filename=document.original_filename,
            document_id=document.document_id,
            tenant_id=document.tenant_id,
            tags=document._tag_slugs,  # type: ignore[attr-defined]
            fallback_name=document.title,
            fixed_name=document.title if document.title_fixed else None,
            metadata=document.chunk_metadata,
            store=vectors,
            embedder=embedder,
            settings=runtime.rag_settings(),
            max_bytes=settings.RAGCHAT_MAX_UPLOAD_BYTES,
            on_parsed=lambda parsed: _parsed(document, parsed, report=report),
            progress=lambda stage, done, total: _progress(document, stage, done, total, report=report),
        )
    except Exception as e:
        return await _fail(document, e, vectors=vectors, report=report)
    await _save(
        document,
        status=Document.Status.READY,
        stage="Ready",
        progress=100,
        chunk_count=result.chunk_count,
        warnings=list(result.parsed.warnings),
        indexed_at=timezone.now(),
    )
    await report(document)
    if result.parsed.attachments:
        await _ingest_attachments(document, result.parsed.attachments)
    logger.info(
        "document indexed",
        extra={"document_id": result.document_id, "chunks": result.chunk_count, "seconds": result.timings.as_dict()},
    )
    return IngestResult(result.document_id, document.status, result.chunk_count)


async def _ingest_attachments(document: Document, attachments: Sequence[Attachment]) -> None:
    """An email's attachments become documents of their own, under the email's tags and uploader,
    each ingested here after the email (so every way of ingesting, inline or in a worker, does it).
    An attachment's own attachments are not taken out again: one level, at most MAX_ATTACHMENTS."""
    if document.chunk_metadata.get("attached_to"):
        return
    created, problems = await sync_to_async(_attachments_create, thread_sensitive=True)(document, attachments)
    if problems:
        await _save(document, warnings=[*document.warnings, *problems])
    for child in created:
        await document_ingest(str(child.pk))


def _attachments_create(document: Document, attachments: Sequence[Attachment]) -> tuple[list[Document], list[str]]:
    tags = list(document.tags.all())
    if document.uploaded_by is None:
        return [], ["The attachments were not added: the email has no uploader to own them."]
    created: list[Document] = []
    problems: list[str] = []
    for attachment in attachments:
        try:
            created.append(
                document_create(
                    user=document.uploaded_by,
                    data=attachment.data,
                    filename=attachment.filename,
                    tags=tags,
                    check_permissions=False,  # the email's tags were checked when it was uploaded
                    source={"chunk_metadata": {"attached_to": document.document_id}},
                )
            )
        except DuplicateDocument as e:
            if e.existing.chunk_metadata.get("attached_to") != document.document_id:  # not from an earlier run
                problems.append(f"Attachment {e}")
        except UploadRefused as e:
            problems.append(f"Attachment {e}")
    return created, problems


async def _parsed(document: Document, parsed: ParsedDocument, *, report: ProgressReporter) -> None:
    title = document.title if document.title_fixed else document_name(parsed, fallback=document.title)
    await _save(
        document,
        stage="Splitting into chunks",
        progress=10,
        title=title,
        mime_type=parsed.mime_type,
        kind=parsed.kind,
        pages=parsed.pages,
        ocr_pages=list(parsed.ocr_pages),
    )
    await report(document)


async def _progress(document: Document, stage: str, done: int, total: int, *, report: ProgressReporter) -> None:
    if stage != "upsert":  # the row shows stored chunks; parsing has its own step (_parsed)
        return
    await _save(document, stage=f"Indexed {done} of {total} chunks", progress=10 + int(88 * done / total))
    await report(document)


async def _fail(document: Document, error: BaseException, *, vectors, report: ProgressReporter) -> IngestResult:
    if not isinstance(error, DocumentError):
        logger.exception("ingestion of %s failed", document.id)
    stage = "Failed"
    try:
        if vectors is not None:  # None: the store never opened, so nothing of ours is in it
            await vectors.delete_document(document.document_id, tenant_id=document.tenant_id)
    except Exception as cleanup_error:  # keep the first reason; the row says it failed either way
        logger.error("could not remove partial vectors of %s: %s", document.id, cleanup_error)
        # The store is gone (the same fault that failed the upsert): the next ingestion, or the
        # server's start, purges these vectors once it is back (documents_purge_failed_vectors).
        stage = STAGE_CLEANUP_PENDING
    message = failure_message(error)
    await _save(document, status=Document.Status.FAILED, stage=stage, progress=0, chunk_count=0, error=message)
    try:
        await broadcast_document(document)
    except Exception:
        pass
    return IngestResult(document.document_id, document.status, 0, message)


async def documents_purge_failed_vectors(*, vectors=None) -> int:
    """Delete the vectors of failed documents whose cleanup could not reach the store at the time
    (stage STAGE_CLEANUP_PENDING), so no half-indexed document stays searchable. Returns how many
    documents were purged; a store still down raises (VectorStoreError) and they stay pending."""
    pending = [d async for d in Document.objects.filter(status=Document.Status.FAILED, stage=STAGE_CLEANUP_PENDING)]
    if not pending:
        return 0
    vectors = vectors or await runtime.ready_vector_service()
    for document in pending:
        await vectors.delete_document(document.document_id, tenant_id=document.tenant_id)
        await Document.objects.filter(pk=document.pk, stage=STAGE_CLEANUP_PENDING).aupdate(stage="Failed")
        logger.info("purged partial vectors of a failed document", extra={"document_id": document.document_id})
    return len(pending)


def document_ingest_sync(document_id, *, report: ProgressReporter | None = None) -> IngestResult:
    return async_to_sync(document_ingest)(str(document_id), report=report)


# ------------------------------------------------------------------------------------- delete


async def document_delete_vectors(*, document_id: str, tenant_id: str) -> int:
    """Remove every chunk of the document and verify none is left; returns how many were removed."""
    vectors = await runtime.ready_vector_service()
    removed = await vectors.delete_document(document_id, tenant_id=tenant_id)
    left = await vectors.count(document_id=document_id, tenant_id=tenant_id)
    if left:
        raise VectorStoreError(f"{left} chunks of {document_id} are still in the index after delete")
    return removed


def document_delete(*, document: Document, actor=None, request=None, reason: str = "") -> int:
    """Delete vectors first (the row stays if that fails, so it can be retried), then file and row.
    The deletion goes to the audit log: by `actor`, or by the system for `reason` (a sync)."""
    from access.audit import audit_record
    from access.models import AuditEvent

    removed = async_to_sync(document_delete_vectors)(document_id=document.document_id, tenant_id=document.tenant_id)
    storage, name = document.file.storage, document.file.name
    tenant_id, document_id = document.tenant_id, document.document_id
    title, tags = document.title, sorted(document.tags.values_list("slug", flat=True))
    document.delete()
    audit_record(
        action=AuditEvent.Action.DOCUMENT_DELETED,
        tenant_id=tenant_id,
        actor=actor,
        summary=f"“{title}” deleted" + (f" ({reason})" if reason else ""),
        data={"document_id": document_id, "title": title, "tags": tags, "chunks": removed, "reason": reason},
        request=request,
    )
    if name:
        storage.delete(name)
    document_cache_clear(document=Document(pk=document_id, tenant_id=tenant_id))
    _notify_deleted(tenant_id=tenant_id, document_id=document_id)
    return removed


def _notify_deleted(*, tenant_id: str, document_id: str) -> None:
    live.group_send(progress_group(tenant_id), {"type": "document.changed", "document_id": document_id})
