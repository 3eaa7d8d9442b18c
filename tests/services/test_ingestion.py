"""The ingestion pipeline (ragchat/services/ingestion.py) against the real embedded Qdrant Edge store
and the hashing embedder: stages in order, timings, progress, cancellation, replacement."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest

from ragchat.evaluation.docgen import lorem_sentences, make_markdown, make_text
from ragchat.services.config import RAGSettings
from ragchat.services.embeddings import HashingEmbedder
from ragchat.services.errors import EmptyDocumentError, UnsupportedDocumentError
from ragchat.services.ingestion import (
    STAGES,
    IngestionCancelled,
    IngestionResult,
    StageTimings,
    ingest_document,
)
from ragchat.services.vector_store import VectorService

TENANT = "default"


@pytest.fixture
def settings(tmp_path) -> RAGSettings:
    return RAGSettings(
        qdrant_path=str(tmp_path / "qdrant"),
        embedding_backend="hashing",
        embedding_model="hashing-384",
        embedding_batch_size=4,
        chunk_size_tokens=64,
        chunk_overlap_tokens=8,
    )


@pytest.fixture
async def store(settings):
    service = VectorService(settings, HashingEmbedder())
    await service.initialize()
    yield service
    await service.close()


def new_id() -> str:
    return str(uuid.uuid4())


async def ingest(store, settings, data: bytes, filename: str = "policy.txt", **kwargs) -> IngestionResult:
    return await ingest_document(
        data=data,
        filename=filename,
        document_id=kwargs.pop("document_id", None) or new_id(),
        tenant_id=TENANT,
        tags=("finance",),
        fallback_name=filename,
        store=store,
        embedder=store.embedder,
        settings=settings,
        **kwargs,
    )


async def test_stages_store_every_chunk_with_its_payload(store, settings):
    data = make_markdown(
        [("Travel", ["Trains are booked in second class.", *lorem_sentences(40, seed=1)])], title="Travel policy"
    )
    result = await ingest(store, settings, data, "travel.md", metadata={"path": "finance/travel.md"})
    assert result.parsed.kind == "markdown"
    assert result.document_name == "Travel policy"
    assert result.chunk_count > 4  # several batches of four
    assert await store.count(document_id=result.document_id, tenant_id=TENANT) == result.chunk_count
    hits = await store.search("trains second class", user_tags=["finance"], tenant_id=TENANT)
    assert hits and hits[0].document_id == result.document_id
    assert hits[0].document_name == "Travel policy" and hits[0].section == "Travel"
    assert hits[0].tags == ["finance"]
    assert [r.chunk_index for r in result.records] == list(range(result.chunk_count))
    assert all(r.metadata == {"path": "finance/travel.md"} for r in result.records)
    assert result.vectors == ()  # only kept when asked for


async def test_timings_cover_every_stage(store, settings):
    result = await ingest(store, settings, make_text(lorem_sentences(60, seed=2)))
    assert isinstance(result.timings, StageTimings)
    seconds = result.timings.as_dict()
    assert list(seconds) == list(STAGES)
    assert all(value > 0 for value in seconds.values()), seconds
    assert result.timings.total == pytest.approx(sum(seconds.values()))
    with pytest.raises(AttributeError):
        result.timings.parse = 0.0  # type: ignore[misc]  # frozen


async def test_progress_reports_each_stage_and_batch_in_order(store, settings):
    calls: list[tuple[str, int, int]] = []
    parsed_titles: list[str] = []

    async def on_parsed(parsed):
        parsed_titles.append(parsed.title)

    result = await ingest(
        store,
        settings,
        make_text(lorem_sentences(60, seed=3)),
        on_parsed=on_parsed,
        progress=lambda stage, done, total: calls.append((stage, done, total)),
    )
    total = result.chunk_count
    batches = -(-total // 4)
    assert parsed_titles == [result.parsed.title]
    assert calls[:2] == [("parse", 1, 1), ("chunk", total, total)]
    assert [c for c in calls if c[0] == "embed"] == [("embed", min(4 * i, total), total) for i in range(1, batches + 1)]
    assert [c for c in calls if c[0] == "upsert"] == [
        ("upsert", min(4 * i, total), total) for i in range(1, batches + 1)
    ]
    assert calls[-1] == ("upsert", total, total)


async def test_cancel_between_batches_raises_and_the_caller_purges_only_that_document(store, settings):
    keep = await ingest(store, settings, make_text(["Keep this other document.", *lorem_sentences(20, seed=4)]))
    stop = threading.Event()
    document_id = new_id()

    def progress(stage, done, total):
        if stage == "upsert" and done == 8:
            stop.set()  # two batches are in the store

    with pytest.raises(IngestionCancelled):
        await ingest(
            store,
            settings,
            make_text(lorem_sentences(80, seed=5)),
            document_id=document_id,
            progress=progress,
            cancelled=stop.is_set,
        )
    assert await store.count(document_id=document_id) == 8, "the pipeline itself leaves the purge to its caller"
    await store.delete_document(document_id, tenant_id=TENANT)
    assert await store.count(document_id=document_id) == 0
    assert await store.count() == keep.chunk_count
    assert await store.count(document_id=keep.document_id) == keep.chunk_count


async def test_cancelled_before_start_touches_nothing(store, settings):
    with pytest.raises(IngestionCancelled):
        await ingest(store, settings, make_text(["Never read."]), cancelled=lambda: True)
    assert await store.count() == 0


async def test_a_new_version_replaces_the_old_chunks(store, settings):
    document_id = new_id()
    first = await ingest(
        store, settings, make_text(["Zebra stripes.", *lorem_sentences(60, seed=6)]), document_id=document_id
    )
    assert first.chunk_count > 2
    second = await ingest(store, settings, make_text(["Giraffe necks only."]), document_id=document_id)
    assert second.chunk_count == 1
    assert await store.count(document_id=document_id) == 1
    hits = await store.search("giraffe necks", user_tags=["finance"], tenant_id=TENANT)
    assert [h.chunk_text for h in hits] == ["Giraffe necks only."]


async def test_keep_vectors_returns_one_vector_per_record(store, settings):
    result = await ingest(store, settings, make_text(lorem_sentences(30, seed=7)), keep_vectors=True)
    assert len(result.vectors) == result.chunk_count
    assert all(len(v) == 384 for v in result.vectors)


async def test_files_the_product_refuses_raise_document_errors_and_store_nothing(store, settings):
    with pytest.raises(UnsupportedDocumentError):
        await ingest(store, settings, b"MZ\x90\x00\x03" + bytes(200), "tool.exe")
    with pytest.raises(EmptyDocumentError):
        await ingest(store, settings, b"   \n  ", "blank.txt")
    assert await store.count() == 0


async def test_a_failing_progress_callback_stops_the_pipeline(store, settings):
    def progress(stage, done, total):
        if stage == "upsert":
            raise RuntimeError("injected")

    document_id = new_id()
    with pytest.raises(RuntimeError, match="injected"):
        await ingest(
            store, settings, make_text(lorem_sentences(60, seed=8)), document_id=document_id, progress=progress
        )
    assert await store.count(document_id=document_id) == 4  # one batch, then the caller's purge


class _Recorded:
    """The real store and embedder, each call taking a moment and leaving a mark in one log."""

    def __init__(self, store: VectorService, log: list[str]) -> None:
        self.store, self.log = store, log
        self.embeds = self.writes = 0

    def count_tokens(self, text: str) -> int:
        return self.store.embedder.count_tokens(text)

    async def embed_documents(self, texts):
        self.embeds += 1
        n = self.embeds
        self.log.append(f"embed {n} start")
        await asyncio.sleep(0.02)
        vectors = await self.store.embedder.embed_documents(texts)
        self.log.append(f"embed {n} end")
        return vectors

    async def upsert_chunks(self, chunks, vectors=None):
        self.writes += 1
        n = self.writes
        self.log.append(f"write {n} start")
        await asyncio.sleep(0.02)
        stored = await self.store.upsert_chunks(chunks, vectors)
        self.log.append(f"write {n} end")
        return stored

    async def delete_document(self, document_id, *, tenant_id=None):
        return await self.store.delete_document(document_id, tenant_id=tenant_id)

    async def count(self, *, document_id=None, tenant_id=None):
        return await self.store.count(document_id=document_id, tenant_id=tenant_id)


async def test_the_store_writes_one_batch_while_the_next_is_embedded(store, settings):
    log: list[str] = []
    recorded = _Recorded(store, log)
    result = await ingest_document(
        data=make_text(lorem_sentences(60, seed=9)),
        filename="policy.txt",
        document_id=new_id(),
        tenant_id=TENANT,
        tags=("finance",),
        fallback_name="policy.txt",
        store=recorded,
        embedder=recorded,
        settings=settings,
    )
    batches = -(-result.chunk_count // 4)
    assert batches >= 3 and recorded.embeds == recorded.writes == batches
    assert await store.count(document_id=result.document_id) == result.chunk_count
    for k in range(1, batches):
        # batch k's write is under way while batch k + 1 is embedded; never two writes at once
        assert log.index(f"embed {k + 1} start") < log.index(f"write {k} end")
        assert log.index(f"write {k} end") < log.index(f"write {k + 1} start")
