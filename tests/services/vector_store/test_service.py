"""VectorService against the real embedded Qdrant Edge engine (tmp_path) and the server backend
through qdrant-client's local mode (AsyncQdrantClient(location=":memory:"), same client API)."""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace

import pytest
from qdrant_client import AsyncQdrantClient

from ragchat.services.config import RAGSettings
from ragchat.services.embeddings import CachedEmbedder, HashingEmbedder
from ragchat.services.errors import CollectionMismatchError, EmbeddingError
from ragchat.services.types import ChunkRecord
from ragchat.services.vector_store import EdgeBackend, ServerBackend, VectorService, point_id

BACKENDS = ["edge", "server"]


def doc_id(n: int) -> str:
    return str(uuid.UUID(int=n, version=4))


def chunk(doc: int, index: int, text: str, *, tags=("public",), tenant="default", **extra) -> ChunkRecord:
    return ChunkRecord(
        document_id=doc_id(doc),
        chunk_index=index,
        document_name=f"doc-{doc}.md",
        chunk_text=text,
        tags=tuple(tags),
        tenant_id=tenant,
        page_number=index + 1,
        section=f"Section {index}",
        token_count=len(text.split()),
        **extra,
    )


@pytest.fixture
def rag_settings(tmp_path) -> RAGSettings:
    return RAGSettings(
        qdrant_path=str(tmp_path / "qdrant"),
        embedding_backend="hashing",
        embedding_model="hashing-384",
        rag_retry_initial_delay=0.01,
    )


@pytest.fixture
async def make_service(rag_settings):
    """Build services on one store per test: the Edge shard in tmp_path or one in-memory client."""
    made: list[VectorService] = []
    clients: list[AsyncQdrantClient] = []

    async def make(kind: str, embedder=None, **overrides) -> VectorService:
        settings = replace(rag_settings, **overrides)
        embedder = embedder if embedder is not None else CachedEmbedder(HashingEmbedder())
        if kind == "edge":
            backend = EdgeBackend(path=settings.qdrant_path, collection=settings.qdrant_collection)
        else:
            if not clients:
                clients.append(AsyncQdrantClient(location=":memory:"))
            backend = ServerBackend(client=clients[0], collection=settings.qdrant_collection)
        service = VectorService(settings, embedder, backend=backend)
        made.append(service)
        return service

    yield make
    for service in made:
        if isinstance(service.backend, EdgeBackend):
            await service.backend.close()
    for client in clients:
        await client.close()


CORPUS = [
    chunk(1, 0, "The vacation policy grants employees twenty five days of paid leave per year."),
    chunk(1, 1, "Unused vacation days can be carried over until the end of March."),
    chunk(2, 0, "Expense reports must be filed within thirty days with receipts attached.", tags=("finance",)),
    chunk(3, 0, "Salary bands for engineering levels are reviewed every spring.", tags=("hr",)),
    chunk(4, 0, "The VPN gateway requires multi factor authentication for remote access.", tags=("it",)),
    chunk(5, 0, "Other tenant: vacation policy gives thirty days of paid leave.", tenant="acme"),
]


@pytest.mark.parametrize("kind", BACKENDS)
async def test_upsert_search_and_delete_by_document(make_service, kind):
    service = await make_service(kind)
    await service.initialize()
    assert await service.upsert_chunks(CORPUS) == len(CORPUS)
    assert await service.count() == len(CORPUS)
    assert await service.count(document_id=doc_id(1)) == 2

    timings: dict = {}
    results = await service.search("vacation days paid leave", user_tags=[], timings=timings, limit=5)
    assert results[0].document_id == doc_id(1)
    assert {"embed", "search"} <= timings.keys()
    top = results[0]
    assert top.document_name == "doc-1.md" and top.page_number == top.chunk_index + 1
    assert top.section == f"Section {top.chunk_index}" and top.tags == ["public"]
    assert all(0.0 <= r.score <= 1.0 for r in results)

    assert await service.delete_document(doc_id(1)) == 2
    assert await service.count(document_id=doc_id(1)) == 0
    assert await service.count() == len(CORPUS) - 2
    after = await service.search("vacation days paid leave", user_tags=[], limit=5)
    assert doc_id(1) not in {r.document_id for r in after}


@pytest.mark.parametrize("kind", BACKENDS)
async def test_reupsert_is_idempotent_and_payload_exact(make_service, kind):
    service = await make_service(kind)
    extra = chunk(7, 0, "Verified answer about parking permits.", metadata={"verified_by": "ann"})
    await service.upsert_chunks([extra, *CORPUS])
    await service.upsert_chunks([extra, *CORPUS])
    assert await service.count() == len(CORPUS) + 1
    stats = await service.stats()
    assert stats == {
        "backend": kind,
        "points": len(CORPUS) + 1,
        "documents": 6,
        "dimension": 384,
        "embedding_model": "hashing-384",
    }
    [hit] = [r for r in await service.search("parking permits", user_tags=[]) if r.document_id == doc_id(7)]
    assert hit.metadata == {"verified_by": "ann"}
    assert hit.token_count == 5 and hit.tenant_id == "default"
    assert point_id(doc_id(7), 0) == point_id(doc_id(7), 0) != point_id(doc_id(7), 1)


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("hybrid", [True, False])
async def test_access_filter_by_tags_and_tenant(make_service, kind, hybrid):
    service = await make_service(kind, rag_hybrid_search=hybrid)
    await service.upsert_chunks(CORPUS)
    queries = ["vacation policy paid leave", "expense reports receipts", "salary bands", "VPN gateway"]
    for user_tags, allowed in [
        ([], {"public"}),
        (["finance"], {"public", "finance"}),
        (["hr", "it"], {"public", "hr", "it"}),
    ]:
        for q in queries:
            for r in await service.search(q, user_tags=user_tags, limit=15):
                assert set(r.tags) & allowed and r.tenant_id == "default"
    # The tagged chunk is reachable with the tag, so the filter above had something to exclude.
    finance = await service.search("expense reports receipts", user_tags=["finance"])
    assert finance[0].document_id == doc_id(2)
    other = await service.search("vacation policy", user_tags=[], tenant_id="acme")
    assert [r.document_id for r in other] == [doc_id(5)]


@pytest.mark.parametrize("kind", BACKENDS)
async def test_bm25_stage_cannot_leak_a_forbidden_exact_keyword(make_service, kind):
    """The forbidden chunk is the only one containing the code: a keyword stage without the access
    filter would surely return it."""
    service = await make_service(kind)
    secret = chunk(9, 0, "Incident ZX-9041 root cause: leaked credentials in the billing cluster.", tags=("security",))
    await service.upsert_chunks([*CORPUS, secret])
    for user_tags in ([], ["finance"], ["hr", "it"]):
        results = await service.search("ZX-9041", user_tags=user_tags, limit=15)
        assert doc_id(9) not in {r.document_id for r in results}
        results = await service.search("ZX-9041", user_tags=user_tags, tenant_id="acme")
        assert doc_id(9) not in {r.document_id for r in results}
    allowed = await service.search("ZX-9041", user_tags=["security"], limit=15)
    assert allowed[0].document_id == doc_id(9)


@pytest.mark.parametrize("kind", BACKENDS)
async def test_public_chunks_are_readable_by_everyone(make_service, kind):
    service = await make_service(kind)
    await service.upsert_chunks(CORPUS)
    for user_tags in ([], ["finance"], ["nonexistent-tag"]):
        results = await service.search("vacation policy paid leave", user_tags=user_tags)
        assert doc_id(1) in {r.document_id for r in results}


@pytest.mark.parametrize("kind", BACKENDS)
async def test_bm25_finds_exact_code_that_dense_misses(make_service, kind):
    """Dense vectors are given explicitly: the chunk with the code points away from the query while
    twenty distractors point towards it, so dense-only top-5 misses it; the BM25 stage finds it."""
    embedder = CachedEmbedder(HashingEmbedder())
    query = "error ERR-4521"
    q = await embedder.embed_query(query)
    away = [-x for x in q]
    distractors = [
        chunk(20 + i, 0, f"General troubleshooting guide number {i} for network connectivity.") for i in range(20)
    ]
    target = chunk(50, 0, "Code ERR-4521 means the licence server clock drifted; resync NTP.")
    vectors = [q] * len(distractors) + [away]

    dense = await make_service(kind, embedder, rag_hybrid_search=False, qdrant_collection="dense")
    await dense.upsert_chunks([*distractors, target], vectors)
    assert doc_id(50) not in {r.document_id for r in await dense.search(query, user_tags=[], limit=5)}

    hybrid = await make_service(kind, embedder, rag_hybrid_search=True, qdrant_collection="hybrid")
    await hybrid.upsert_chunks([*distractors, target], vectors)
    results = await hybrid.search(query, user_tags=[], limit=5)
    found = [r for r in results if r.document_id == doc_id(50)]
    assert found and found[0].score == 0.0  # score stays cosine (clamped), order is fused


@pytest.mark.parametrize("kind", BACKENDS)
async def test_scores_are_cosine_similarity_not_rrf(make_service, kind):
    embedder = CachedEmbedder(HashingEmbedder())
    service = await make_service(kind, embedder)
    await service.upsert_chunks(CORPUS)
    query = "Unused vacation days can be carried over until the end of March."
    results = await service.search(query, user_tags=[])
    assert results[0].document_id == doc_id(1) and results[0].chunk_index == 1
    assert results[0].score == pytest.approx(1.0, abs=1e-5)
    q = await embedder.embed_query(query)
    d = (await embedder.embed_documents([CORPUS[0].chunk_text]))[0]
    expected = max(0.0, sum(a * b for a, b in zip(q, d)))
    [other] = [r for r in results if r.source_id == CORPUS[0].source_id]
    assert other.score == pytest.approx(expected, abs=1e-5)
    assert not await service.search(query, user_tags=[], score_threshold=1.01)


@pytest.mark.parametrize("kind", BACKENDS)
async def test_identical_top5_twice(make_service, kind):
    """Axiom A1 of docs/specs/rag-standard-v1.md: same corpus and config -> identical top results, including ties."""
    service = await make_service(kind)
    duplicates = [chunk(60 + i, 0, "Badge access to the server room is logged.") for i in range(8)]
    await service.upsert_chunks([*CORPUS, *duplicates])
    runs = []
    for _ in range(2):
        results = await service.search("badge access server room", user_tags=["hr"], limit=5)
        runs.append([(r.source_id, round(r.score, 6)) for r in results])
    assert runs[0] == runs[1]
    # Equal scores are ordered by point id, a function of the source id.
    ids = [point_id(doc, int(index)) for doc, index in (s.rsplit(":", 1) for s, _ in runs[0])]
    assert len({score for _, score in runs[0]}) == 1 and ids == sorted(ids)


@pytest.mark.parametrize("kind", BACKENDS)
async def test_dimension_mismatch_is_a_clear_error(make_service, kind, caplog):
    first = await make_service(kind, CachedEmbedder(HashingEmbedder(dimension=384)))
    await first.upsert_chunks(CORPUS[:2])
    if kind == "edge":
        await first.close()
    second = await make_service(kind, CachedEmbedder(HashingEmbedder(dimension=64)))
    with caplog.at_level(logging.WARNING, logger="ragchat.services.vector_store.edge"):
        with pytest.raises(CollectionMismatchError) as info:
            await second.initialize()
    message = str(info.value)
    assert "hashing-384" in message and "384 dims" in message
    assert "hashing-64" in message and "64 dims" in message and "reindex" in message
    if kind == "edge":  # Edge refused today's configuration for the stored vectors, and the log says so
        (kept,) = [r for r in caplog.records if getattr(r, "event", "") == "vector_store_config_kept"]
        assert "keeps its stored configuration" in kept.getMessage()


class RenamedEmbedder(HashingEmbedder):
    """Same vectors, another model name: what a swapped model of equal dimension looks like."""

    def __init__(self) -> None:
        super().__init__(dimension=384)
        self.model_name = "other-model-384"


@pytest.mark.parametrize("kind", BACKENDS)
async def test_model_mismatch_is_a_clear_error(make_service, kind):
    first = await make_service(kind)
    await first.upsert_chunks(CORPUS[:2])
    if kind == "edge":
        await first.close()
    second = await make_service(kind, RenamedEmbedder())
    with pytest.raises(CollectionMismatchError, match="other-model-384"):
        await second.initialize()
    # The same model reopens fine and sees the stored points.
    third = await make_service(kind)
    assert await third.count() == 2


async def test_edge_persists_across_reopen(make_service):
    service = await make_service("edge")
    await service.upsert_chunks(CORPUS)
    await service.close()
    reopened = await make_service("edge")
    assert await reopened.count() == len(CORPUS)
    results = await reopened.search("expense reports", user_tags=["finance"])
    assert results[0].document_id == doc_id(2)


async def test_two_services_share_one_edge_shard(make_service):
    """The shard's WAL is locked by its opener: a second service on the same path must share it."""
    a = await make_service("edge")
    b = await make_service("edge")
    await a.upsert_chunks(CORPUS)
    assert await b.count() == len(CORPUS)
    await a.close()
    assert await b.count() == len(CORPUS)


async def test_unreachable_server_raises_vector_store_error(rag_settings):
    """A real refused connection: retried (transient), then surfaced as VectorStoreError."""
    from ragchat.services.errors import VectorStoreError

    client = AsyncQdrantClient(url="http://127.0.0.1:9", timeout=1, check_compatibility=False)
    backend = ServerBackend(client=client, collection="x", retry_attempts=1, retry_initial_delay=0.01)
    service = VectorService(rag_settings, CachedEmbedder(HashingEmbedder()), backend=backend)
    with pytest.raises(VectorStoreError, match="Qdrant collection 'x'"):
        await service.initialize()
    await client.close()


@pytest.mark.parametrize("kind", BACKENDS)
async def test_export_drop_and_import_round_trip(make_service, kind):
    """What backup and restore do with the store (ragchat/management/backup.py): every point out with
    its vectors and payload, the collection dropped, the points back in; searches answer the same."""
    service = await make_service(kind)
    await service.initialize()
    await service.upsert_chunks(CORPUS)
    before = await service.search("vacation days paid leave", user_tags=["finance"], limit=5)
    exported = [p async for batch in service.export_points(batch_size=2) for p in batch]
    assert len(exported) == len(CORPUS) and len({p.id for p in exported}) == len(CORPUS)
    assert all(len(p.dense) == 384 and p.sparse.indices and p.payload["document_id"] for p in exported)

    await service.drop()
    await service.initialize()
    assert await service.count() == 0
    assert await service.import_points(exported) == len(CORPUS)
    after = await service.search("vacation days paid leave", user_tags=["finance"], limit=5)
    assert [(r.source_id, round(r.score, 5)) for r in after] == [(r.source_id, round(r.score, 5)) for r in before]
    with pytest.raises(EmbeddingError, match="dims"):
        await service.import_points([replace(exported[0], dense=[0.1] * 8)])


@pytest.mark.parametrize("kind", BACKENDS)
async def test_stages_return_the_keys_asked_for_and_fetch_returns_whole_points(make_service, kind):
    """A search ranks its hits on a few payload keys, then fetches the whole payload (and, for hits
    only BM25 found, the dense vector) of the ones it returns."""
    from ragchat.services.vector_store.access import access_conditions
    from ragchat.services.vector_store.backend import Stage
    from ragchat.services.vector_store.payload import DENSE

    service = await make_service(kind)
    await service.initialize()
    await service.upsert_chunks(CORPUS)
    vector = await service.embedder.embed_query("vacation days")
    conditions = access_conditions(user_tags=[], tenant_id="default")
    (hits,) = await service.backend.search_stages(
        [Stage(DENSE, vector, conditions, 5, keys=("document_id", "chunk_index", "tags"))]
    )
    assert hits and all(set(h.payload) <= {"document_id", "chunk_index", "tags"} for h in hits)
    assert all(h.dense is None for h in hits)
    ids = [h.id for h in hits[:2]]
    points = await service.backend.fetch([*ids, "00000000-0000-4000-8000-000000000000"], with_dense=True)
    assert sorted(p.id for p in points) == sorted(ids)  # an id no longer stored is left out
    assert all("chunk_text" in p.payload and len(p.dense) == 384 for p in points)
    assert all(p.dense is None for p in await service.backend.fetch(ids))
    assert await service.backend.fetch([]) == []
