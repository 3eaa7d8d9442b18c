"""The one ingestion pipeline: a document's bytes in, its chunks searchable in the vector store out.

Stages, in order: parse (bytes -> pages and sections), chunk (sized to the embedder's tokenizer),
embed (in batches of `embedding_batch_size`) and upsert (the document's old chunks go first, so a
new version or a re-index replaces them; the stored count is checked at the end). The store writes
one batch while the model embeds the next, so a long document never holds all its vectors at once
and neither waits for the other.

Every caller goes through `ingest_document()`: the documents app (uploads, re-index, the
`ingest_folder` and `demo_data` commands) and `manage.py evaluate` / `manage.py bench`, so the
benchmark measures the product's path. The caller owns everything around it: where the bytes come
from, status rows, notifications, and the cleanup on failure. The pipeline never deletes vectors
after it fails or is cancelled; the caller purges the document (`VectorService.delete_document`),
which it must do anyway when, say, the store went down mid-way.

`progress(stage, done, total)` is called (and awaited when it returns an awaitable) after parsing,
after chunking and after each embedded and each upserted batch; an exception it raises stops the
pipeline like any other. `cancelled()` is checked before every stage and every batch; when it
returns true the pipeline raises `IngestionCancelled`.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ragchat.services.chunking import Chunk, chunk_document
from ragchat.services.config import RAGSettings
from ragchat.services.errors import EmptyDocumentError, VectorStoreError
from ragchat.services.parsing import DEFAULT_MAX_BYTES, DEFAULT_MAX_UNPACKED_BYTES, ParsedDocument, parse_document
from ragchat.services.types import ChunkRecord

STAGES = ("parse", "chunk", "embed", "upsert")
# Document names are shown on citation cards; a parser may find a whole paragraph as the title.
MAX_DOCUMENT_NAME = 300

Progress = Callable[[str, int, int], "Awaitable[None] | None"]
ParsedHook = Callable[[ParsedDocument], "Awaitable[None] | None"]


class IngestionCancelled(Exception):
    """The caller asked to stop. Batches already upserted stay in the store: the caller purges them."""


class IngestEmbedder(Protocol):
    def count_tokens(self, text: str) -> int: ...

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...


class ChunkStore(Protocol):
    """What the pipeline needs of the vector store (ragchat.services.vector_store.VectorService)."""

    async def delete_document(self, document_id: str, *, tenant_id: str | None = None) -> int: ...

    async def upsert_chunks(
        self, chunks: Sequence[ChunkRecord], vectors: Sequence[Sequence[float]] | None = None
    ) -> int: ...

    async def count(self, *, document_id: str | None = None, tenant_id: str | None = None) -> int: ...


@dataclass(frozen=True)
class StageTimings:
    """Seconds spent in each stage (wall clock, including waits on threads and the store)."""

    parse: float = 0.0
    chunk: float = 0.0
    embed: float = 0.0
    upsert: float = 0.0

    @property
    def total(self) -> float:
        return self.parse + self.chunk + self.embed + self.upsert

    def as_dict(self) -> dict[str, float]:
        return {stage: getattr(self, stage) for stage in STAGES}


@dataclass(frozen=True)
class IngestionResult:
    document_id: str
    tenant_id: str
    document_name: str
    parsed: ParsedDocument
    records: tuple[ChunkRecord, ...]
    timings: StageTimings
    # The embeddings of `records`, in order; only kept when asked for (keep_vectors=True).
    vectors: tuple[list[float], ...] = field(default=(), repr=False)

    @property
    def chunk_count(self) -> int:
        return len(self.records)


def chunk_records(
    *,
    chunks: Iterable[Chunk],
    document_id: str,
    document_name: str,
    tags: Iterable[str],
    tenant_id: str,
    metadata: dict | None = None,
) -> list[ChunkRecord]:
    """The chunks of one document as the records the vector store indexes (its payload)."""
    tags = tuple(tags)
    return [
        ChunkRecord(
            document_id=document_id,
            chunk_index=chunk.chunk_index,
            document_name=document_name,
            chunk_text=chunk.text,
            tags=tags,
            tenant_id=tenant_id,
            page_number=chunk.page_number,
            section=chunk.section,
            token_count=chunk.token_count,
            metadata=dict(metadata or {}),
        )
        for chunk in chunks
    ]


def document_name(parsed: ParsedDocument, *, fallback: str) -> str:
    """The name citations show: the title found in the file, else the caller's (a file name)."""
    return parsed.title[:MAX_DOCUMENT_NAME] or fallback


async def ingest_document(
    *,
    data: bytes,
    filename: str,
    document_id: str,
    tenant_id: str,
    tags: Sequence[str],
    fallback_name: str,
    store: ChunkStore,
    fixed_name: str | None = None,
    embedder: IngestEmbedder,
    settings: RAGSettings,
    metadata: dict | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_unpacked_bytes: int = DEFAULT_MAX_UNPACKED_BYTES,
    on_parsed: ParsedHook | None = None,
    progress: Progress | None = None,
    cancelled: Callable[[], bool] | None = None,
    keep_vectors: bool = False,
) -> IngestionResult:
    """Parse, chunk, embed and upsert one document; raises DocumentError (a file we cannot index,
    with a sentence for its uploader), EmbeddingError, VectorStoreError or IngestionCancelled.
    Chunks carry `fixed_name` when a person named the document, else the file's title or `fallback_name`."""
    run = _Run(progress=progress, cancelled=cancelled)
    run.check()
    parsed = await run.timed(
        "parse",
        asyncio.to_thread(
            parse_document, data=data, filename=filename, max_bytes=max_bytes, max_unpacked_bytes=max_unpacked_bytes
        ),
    )
    if on_parsed is not None:
        await _maybe_await(on_parsed(parsed))
    await run.report("parse", 1, 1)
    run.check()
    chunks = await run.timed(
        "chunk",
        asyncio.to_thread(
            chunk_document,
            parsed=parsed,
            chunk_size=settings.effective_chunk_size,
            overlap=settings.chunk_overlap_tokens,
            count_tokens=embedder.count_tokens,
        ),
    )
    if not chunks:
        raise EmptyDocumentError("No text to index was found in this file.")
    name = fixed_name or document_name(parsed, fallback=fallback_name)
    records = chunk_records(
        chunks=chunks, document_id=document_id, document_name=name, tags=tags, tenant_id=tenant_id, metadata=metadata
    )
    await run.report("chunk", len(records), len(records))
    vectors = await _embed_and_upsert(
        run,
        records=records,
        store=store,
        embedder=embedder,
        batch_size=max(1, settings.embedding_batch_size),
        keep_vectors=keep_vectors,
    )
    return IngestionResult(
        document_id=document_id,
        tenant_id=tenant_id,
        document_name=name,
        parsed=parsed,
        records=tuple(records),
        timings=run.timings(),
        vectors=tuple(vectors),
    )


async def _embed_and_upsert(
    run: _Run,
    *,
    records: list[ChunkRecord],
    store: ChunkStore,
    embedder: IngestEmbedder,
    batch_size: int,
    keep_vectors: bool,
) -> list[list[float]]:
    document_id, tenant_id = records[0].document_id, records[0].tenant_id
    run.check()
    # A new version (or a re-index) replaces the chunks: the old ones go first.
    await run.timed("upsert", store.delete_document(document_id, tenant_id=tenant_id))
    kept: list[list[float]] = []
    total = len(records)
    done = 0
    # The store writes batch k while the model embeds batch k + 1 (at most one write in flight).
    writing: asyncio.Future[int] | None = None
    try:
        for start in range(0, total, batch_size):
            run.check()
            batch = records[start : start + batch_size]
            embedded = await run.timed("embed", embedder.embed_documents([r.chunk_text for r in batch]))
            await run.report("embed", done + len(batch), total)
            if writing is not None:
                await writing
                writing = None
                await run.report("upsert", done, total)
                run.check()
            writing = asyncio.ensure_future(run.timed("upsert", store.upsert_chunks(batch, embedded)))
            done += len(batch)
            if keep_vectors:
                kept.extend(embedded)
        if writing is not None:
            await writing
            writing = None
            await run.report("upsert", done, total)
    finally:
        if writing is not None:  # failed or cancelled mid-way: the write in flight ends before the caller purges
            await asyncio.gather(writing, return_exceptions=True)
    stored = await run.timed("upsert", store.count(document_id=document_id, tenant_id=tenant_id))
    if stored != total:
        raise VectorStoreError(f"expected {total} chunks in the index, found {stored}")
    return kept


class _Run:
    """One pipeline run's clock, progress and cancellation."""

    def __init__(self, *, progress: Progress | None, cancelled: Callable[[], bool] | None) -> None:
        self._progress = progress
        self._cancelled = cancelled
        self._seconds = dict.fromkeys(STAGES, 0.0)

    def check(self) -> None:
        if self._cancelled is not None and self._cancelled():
            raise IngestionCancelled("Ingestion was cancelled.")

    async def timed(self, stage: str, work: Awaitable):
        started = time.perf_counter()
        try:
            return await work
        finally:
            self._seconds[stage] += time.perf_counter() - started

    async def report(self, stage: str, done: int, total: int) -> None:
        if self._progress is not None:
            await _maybe_await(self._progress(stage, done, total))

    def timings(self) -> StageTimings:
        return StageTimings(**self._seconds)


async def _maybe_await(value) -> None:
    if inspect.isawaitable(value):
        await value
