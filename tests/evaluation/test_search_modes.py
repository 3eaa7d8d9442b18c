"""VectorService.search(mode=...): the three modes the evaluation compares, under the same access filter."""

import pytest

from ragchat.services.config import RAGSettings
from ragchat.services.embeddings import HashingEmbedder
from ragchat.services.types import ChunkRecord
from ragchat.services.vector_store import VectorService

DOC = "11111111-1111-4111-8111-111111111111"
SECRET = "22222222-2222-4222-8222-222222222222"


@pytest.fixture
async def service(tmp_path):
    settings = RAGSettings(qdrant_path=str(tmp_path), embedding_backend="hashing", embedding_model="hashing-384")
    svc = VectorService(settings, HashingEmbedder())
    texts = [
        "Error VPN-809 means the device certificate expired.",
        "The canteen opens at eleven.",
        "Parking permits are issued by reception.",
    ]
    chunks = [ChunkRecord(DOC, i, "Guide", t, ("it",)) for i, t in enumerate(texts)]
    chunks.append(ChunkRecord(SECRET, 0, "Secret", "Error VPN-809 in the legal archive.", ("legal",)))
    await svc.upsert_chunks(chunks)
    yield svc
    await svc.close()


async def test_each_mode_searches_within_the_access_filter(service):
    for mode in ("hybrid", "dense", "bm25"):
        results = await service.search("VPN-809", user_tags=["it"], mode=mode)
        assert results, mode
        assert results[0].source_id == f"{DOC}:0", mode
        assert all(r.document_id != SECRET for r in results), mode
        assert all(0.0 <= r.score <= 1.0 for r in results)


async def test_bm25_mode_returns_only_keyword_matches_scored_by_cosine(service):
    bm25 = await service.search("canteen", user_tags=["it"], mode="bm25", limit=10)
    dense = await service.search("canteen", user_tags=["it"], mode="dense", limit=10)
    assert [r.chunk_index for r in bm25] == [1]  # the only chunk with the word
    assert len(dense) == 3  # nearest neighbours: every chunk the user may read
    assert bm25[0].score == pytest.approx(next(r.score for r in dense if r.chunk_index == 1), abs=1e-5)


async def test_unknown_mode_is_refused(service):
    with pytest.raises(ValueError, match="search mode"):
        await service.search("x", user_tags=["it"], mode="fuzzy")
