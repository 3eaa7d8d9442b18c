"""Verified knowledge in the store: a document's chunks get a new status without re-embedding
(set_document_payload), and RAG_NEEDS_REVIEW_CITED decides whether a chunk that needs review is
still retrieved — through the access conditions of every search stage, on both backends (real
Qdrant Edge in tmp_path, and qdrant-client's local engine)."""

from __future__ import annotations

import pytest

from ragchat.services.vector_store.access import access_conditions, allowed
from tests.services.vector_store.test_service import BACKENDS, chunk, doc_id, make_service, rag_settings  # noqa: F401

VERIFIED = {"verified": True, "verified_by": "Ada Admin", "knowledge_status": "verified", "verified_answer_id": 7}
NEEDS_REVIEW = {"verified": False, "knowledge_status": "needs_review"}
QUERY = "visitor parking permit for the company garage"


def corpus():
    return [
        chunk(1, 0, "Visitors get a day parking permit for the company garage from reception.", metadata=VERIFIED),
        chunk(1, 1, "Parking permit for visitors: reception hands out the company garage permit.", metadata=VERIFIED),
        chunk(2, 0, "The company garage has forty parking spaces for employees with a permit."),
    ]


@pytest.mark.parametrize("kind", BACKENDS)
async def test_set_document_payload_changes_one_documents_chunks_only(make_service, kind):  # noqa: F811
    service = await make_service(kind)
    await service.upsert_chunks(corpus())
    touched = await service.set_document_payload(doc_id(1), NEEDS_REVIEW, tenant_id="default")
    assert touched == 2
    results = await service.search(QUERY, user_tags=["public"], limit=10)
    by_doc = {(r.document_id, r.chunk_index): r for r in results}
    for index in (0, 1):
        meta = by_doc[(doc_id(1), index)].metadata
        # The keys set are replaced, the others kept.
        assert meta == {**VERIFIED, **NEEDS_REVIEW}
    assert by_doc[(doc_id(2), 0)].metadata == {}
    # Another tenant's scope touches nothing; a core field cannot be overwritten.
    assert await service.set_document_payload(doc_id(1), VERIFIED, tenant_id="t2") == 0
    with pytest.raises(ValueError, match="tags"):
        await service.set_document_payload(doc_id(1), {"tags": ["secret"]})


@pytest.mark.parametrize("kind", BACKENDS)
async def test_needs_review_is_retrieved_or_excluded_by_the_setting(make_service, kind):  # noqa: F811
    cited = await make_service(kind)  # the default: still cited (shown as "needs review")
    await cited.upsert_chunks(corpus())
    await cited.set_document_payload(doc_id(1), NEEDS_REVIEW)
    docs = {r.document_id for r in await cited.search(QUERY, user_tags=["public"], limit=10)}
    assert docs == {doc_id(1), doc_id(2)}

    excluded = await make_service(kind, rag_needs_review_cited=False)
    for mode in ("hybrid", "dense", "bm25"):
        docs = {r.document_id for r in await excluded.search(QUERY, user_tags=["public"], limit=10, mode=mode)}
        assert docs == {doc_id(2)}, mode

    # Re-verified: retrieved again by the same service.
    await excluded.set_document_payload(doc_id(1), VERIFIED)
    docs = {r.document_id for r in await excluded.search(QUERY, user_tags=["public"], limit=10)}
    assert docs == {doc_id(1), doc_id(2)}


def test_the_recheck_applies_the_exclusion_too():
    conditions = access_conditions(user_tags=["it"], tenant_id="default", cite_needs_review=False)
    base = {"tenant_id": "default", "tags": ["it"]}
    assert allowed(base, conditions)
    assert allowed({**base, "knowledge_status": "verified"}, conditions)
    assert not allowed({**base, "knowledge_status": "needs_review"}, conditions)
    cited = access_conditions(user_tags=["it"], tenant_id="default")
    assert allowed({**base, "knowledge_status": "needs_review"}, cited)
