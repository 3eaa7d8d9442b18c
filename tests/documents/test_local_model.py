"""One end-to-end ingestion with the real local model (all-MiniLM-L6-v2): chunks sized by its own
tokenizer fit its 256 word-piece window, and a paraphrased question finds the right chunk."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ragchat.evaluation.docgen import make_docx

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


def test_ingest_with_minilm(upload, vectors, settings, rag_runtime):
    from ragchat import runtime

    settings.RAG = replace(rag_runtime, embedding_backend="local", embedding_model="all-MiniLM-L6-v2")
    runtime.reset()
    data = make_docx(
        [
            ("Holidays", ["Every employee gets 28 days of paid vacation per year. " * 3]),
            ("Laptops", ["Company notebooks are swapped for new hardware every four years. " * 3]),
            ("Expenses", ["Receipts for business meals must be submitted within thirty days. " * 40]),
        ],
        title="Handbook",
    )
    document = upload(data, "handbook.docx")
    assert document.status == "ready", document.error
    assert vectors.count(document_id=str(document.id)) == document.chunk_count >= 3
    embedder = runtime.embedder()
    assert embedder.model_name == "all-MiniLM-L6-v2"
    results = vectors.search("how often do we get a new computer?", user_tags=["finance"])
    assert results[0].section == "Laptops"
    assert all((r.token_count or 0) <= 256 for r in results)
