"""End to end through the real parser, chunker, hashing embedder and embedded Qdrant."""

from __future__ import annotations

import pytest

from documents import services
from documents.models import Document
from ragchat.evaluation.docgen import (
    lorem_sentences,
    make_docx,
    make_html,
    make_markdown,
    make_pdf,
    make_text,
)

pytestmark = pytest.mark.django_db

FINANCE = ["finance", "public"]


def _chunks(vectors, document, query):
    return [r for r in vectors.search(query, user_tags=FINANCE, limit=50) if r.document_id == str(document.id)]


def _assert_indexed(document, vectors):
    assert document.status == Document.Status.READY, document.error
    assert document.chunk_count > 0
    assert document.progress == 100
    assert vectors.count(document_id=str(document.id), tenant_id="default") == document.chunk_count


def test_pdf_keeps_page_numbers_and_payload(upload, vectors):
    pages = [
        "Travel expenses are reimbursed within thirty days of the claim. " + " ".join(lorem_sentences(40, seed=1)),
        "The quarterly budget review happens in the first week of April. " + " ".join(lorem_sentences(40, seed=2)),
    ]
    document = upload(make_pdf(pages, title="Expense policy"), "expenses.pdf")
    _assert_indexed(document, vectors)
    assert document.pages == 2 and document.kind == "pdf" and document.title == "Expense policy"
    results = _chunks(vectors, document, "quarterly budget review April")
    assert results, "the document's chunks are searchable"
    top = results[0]
    assert top.document_id == str(document.id) == str(document.id).lower()
    assert top.document_name == "Expense policy"
    assert top.tags == ["finance"] and top.tenant_id == "default"
    assert {r.page_number for r in _chunks(vectors, document, "lorem")} <= {1, 2}
    assert any(r.page_number == 2 for r in results)


def test_docx_headings_become_sections(upload, vectors):
    data = make_docx(
        [
            ("Onboarding", lorem_sentences(30, seed=3)),
            ("Laptop policy", ["Laptops are replaced every three years."] + lorem_sentences(30, seed=4)),
        ],
        title="IT handbook",
    )
    document = upload(data, "it.docx")
    _assert_indexed(document, vectors)
    assert document.kind == "docx"
    sections = {r.section for r in _chunks(vectors, document, "laptops replaced every three years")}
    assert "Laptop policy" in sections


def test_html_drops_scripts_and_keeps_headings(upload, vectors):
    data = make_html(
        [("Security rules", ["Passwords rotate every ninety days."] + lorem_sentences(10, seed=5))],
        title="Security",
        script="alert('pwned')",
    )
    document = upload(data, "security.html")
    _assert_indexed(document, vectors)
    results = _chunks(vectors, document, "passwords rotate ninety days")
    assert results and results[0].section == "Security rules"
    assert all("alert" not in r.chunk_text and "Site menu link" not in r.chunk_text for r in results)


def test_markdown_headings_become_sections(upload, vectors):
    data = make_markdown([("Reimbursement", ["Receipts must be attached to every claim."])], title="Finance notes")
    document = upload(data, "notes.md")
    _assert_indexed(document, vectors)
    assert document.kind == "markdown" and document.title == "Finance notes"
    assert _chunks(vectors, document, "receipts attached claim")[0].section == "Reimbursement"


def test_plain_text(upload, vectors):
    document = upload(make_text(["Office hours are nine to five.", *lorem_sentences(20, seed=6)]), "hours.txt")
    _assert_indexed(document, vectors)
    assert document.kind == "text"


def test_long_document_is_split_into_many_chunks_in_batches(upload, vectors, settings, rag_runtime):
    from dataclasses import replace

    settings.RAG = replace(rag_runtime, embedding_batch_size=4, chunk_size_tokens=64, chunk_overlap_tokens=8)
    stages = []

    async def report(document):
        stages.append(document.stage)

    document = upload(make_text(lorem_sentences(200, seed=7)), "long.txt", report=report)
    _assert_indexed(document, vectors)
    assert document.chunk_count > 8
    assert sum(1 for s in stages if s.startswith("Indexed")) == -(-document.chunk_count // 4)
    assert stages[-1] == "Ready"


def test_same_content_twice_is_refused_as_existing(upload, people, tags, vectors):
    data = make_text(["The cafeteria opens at eight."])
    first = upload(data, "cafe.txt")
    with pytest.raises(services.DuplicateDocument) as refused:
        services.document_create(user=people["admin"], data=data, filename="copy.txt", tags=[tags["hr"]])
    assert "already exists" in str(refused.value) and first.title in str(refused.value)
    assert Document.objects.count() == 1
    assert vectors.count(document_id=str(first.id)) == first.chunk_count


def test_same_content_in_another_tenant_is_allowed(upload, people, rag_runtime):
    data = make_text(["Shared content across companies."])
    upload(data, "a.txt")
    other_tag = services.tag_create(tenant_id="acme", name="Acme docs", owner=people["other_tenant"])
    document = services.document_create(user=people["other_tenant"], data=data, filename="a.txt", tags=[other_tag])
    assert document.tenant_id == "acme"


def test_new_version_replaces_chunks(upload, people, vectors, settings, rag_runtime):
    from dataclasses import replace

    settings.RAG = replace(rag_runtime, chunk_size_tokens=64, chunk_overlap_tokens=8)
    document = upload(make_text(["Zebra stripes policy. " + " ".join(lorem_sentences(60, seed=8))]), "policy.txt")
    old_count = document.chunk_count
    assert old_count > 2
    services.document_replace_file(
        document=document, data=make_text(["Giraffe necks policy only."]), filename="policy-v2.txt"
    )
    services.document_ingest_sync(document.id)
    document.refresh_from_db()
    assert document.version == 2 and document.status == "ready"
    assert document.chunk_count == 1
    assert vectors.count(document_id=str(document.id)) == 1
    texts = [r.chunk_text for r in vectors.search("zebra stripes policy", user_tags=FINANCE)]
    assert all("Zebra" not in t for t in texts)
    assert any("Giraffe" in t for t in texts)


def test_failure_after_some_upserts_leaves_no_vectors(upload, vectors, settings, rag_runtime):
    from dataclasses import replace

    settings.RAG = replace(rag_runtime, embedding_batch_size=3, chunk_size_tokens=64, chunk_overlap_tokens=8)
    seen = {"batches": 0, "stored": 0}

    async def report(document):
        if document.stage.startswith("Indexed"):
            seen["batches"] += 1
            if seen["batches"] == 2:
                from ragchat import runtime

                seen["stored"] = await (await runtime.ready_vector_service()).count(document_id=str(document.id))
                raise RuntimeError("injected failure after two batches")

    document = upload(make_text(lorem_sentences(120, seed=9)), "big.txt", report=report)
    assert seen["stored"] == 6, "two batches of three were in the index when it failed"
    assert document.status == Document.Status.FAILED
    assert "injected failure" in document.error
    assert document.chunk_count == 0
    assert vectors.count(document_id=str(document.id)) == 0
    assert vectors.count() == 0


def test_embedding_service_failure_marks_failed_with_reason(people, tags, vectors, settings, rag_runtime, fake_ollama):
    from dataclasses import replace

    from ragchat import runtime

    settings.RAG = replace(
        rag_runtime, embedding_backend="ollama", embedding_model="nomic-embed-text", rag_retry_attempts=0
    )
    runtime.reset()
    fake_ollama.fail_with(500, times=None, paths=("/api/embed",))
    document = services.document_create(
        user=people["owner"], data=make_text(["Anything at all."]), filename="x.txt", tags=[tags["finance"]]
    )
    fake_ollama.embedding_dimension(768)
    result = services.document_ingest_sync(document.id)
    document.refresh_from_db()
    assert result.status == document.status == "failed"
    assert "embedding" in document.error.lower()


def test_retry_after_failure_indexes(upload, vectors):
    calls = {"n": 0}

    async def failing(document):
        calls["n"] += 1
        if document.stage.startswith("Indexed"):
            raise RuntimeError("flaky")

    document = upload(make_text(["Retry me please."]), "retry.txt", report=failing)
    assert document.status == "failed"
    services.document_requeue(document=document)
    services.document_ingest_sync(document.id)
    document.refresh_from_db()
    assert document.status == "ready" and document.error == ""
    assert vectors.count(document_id=str(document.id)) == document.chunk_count == 1


def test_delete_leaves_zero_vectors(upload, vectors):
    keep = upload(make_text(["Keep this one."]), "keep.txt")
    document = upload(make_text(lorem_sentences(50, seed=10)), "gone.txt")
    assert vectors.count(document_id=str(document.id)) > 0
    path = document.file.path
    removed = services.document_delete(document=document)
    assert removed > 0
    assert vectors.count(document_id=str(document.id)) == 0
    assert not Document.objects.filter(pk=document.pk).exists()
    import os

    assert not os.path.exists(path)
    assert vectors.count(document_id=str(keep.id)) == keep.chunk_count


def test_ingesting_twice_does_not_run_twice(upload):
    document = upload(make_text(["Only once."]), "once.txt")
    result = services.document_ingest_sync(document.id)  # not queued any more: nothing to do
    assert result.status == "ready" and result.chunk_count == document.chunk_count
