"""manage.py demo_data (idempotent) and ingest_folder (progress + summary)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from access.policy import readable_tag_slugs as user_tag_slugs
from documents.models import Document, Tag
from ragchat.evaluation.docgen import make_png, make_text

pytestmark = pytest.mark.django_db


def test_demo_data_is_idempotent_and_indexes_every_format(rag_runtime, vectors, django_user_model):
    out = io.StringIO()
    call_command("demo_data", stdout=out)
    text = out.getvalue()
    assert "admin  / admin-demo-2026" in text and "emma" in text and "noah" in text
    documents = Document.objects.all()
    assert documents.count() == 6
    assert {d.kind for d in documents} == {"pdf", "docx", "html", "markdown", "text"}
    assert all(d.status == "ready" for d in documents), [d.error for d in documents]
    total = vectors.count()
    assert total == sum(d.chunk_count for d in documents) > 0
    assert Tag.objects.get(slug="it").owner.username == "ivan"
    emma = django_user_model.objects.get(username="emma")
    assert user_tag_slugs(user=emma) == ["handbook", "it", "public"]
    assert all(
        "finance" not in r.tags for r in vectors.search("expense claims receipts", user_tags=user_tag_slugs(user=emma))
    )
    call_command("demo_data", stdout=io.StringIO())
    assert Document.objects.count() == 6 and django_user_model.objects.count() == 5
    assert vectors.count() == total


def test_ingest_folder_reports_a_summary(rag_runtime, vectors, tmp_path, tags, people):
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    (folder / "one.txt").write_bytes(make_text(["Folder document one."]))
    (folder / "sub" / "two.md").write_bytes(b"# Two\n\nSecond folder document.")
    (folder / "copy.txt").write_bytes(make_text(["Folder document one."]))
    (folder / "image.png").write_bytes(make_png())
    out, err = io.StringIO(), io.StringIO()
    call_command("ingest_folder", str(folder), "--tag", "finance", stdout=out, stderr=err, verbosity=0)
    assert "4 files" in out.getvalue() and "2 indexed" in out.getvalue()
    assert "1 already present, 1 refused, 0 failed" in out.getvalue()
    assert "image.png" in err.getvalue()
    assert vectors.count() == sum(d.chunk_count for d in Document.objects.all()) == 2
    with pytest.raises(CommandError, match="No tag 'nope'"):
        call_command("ingest_folder", str(folder), "--tag", "nope", stdout=io.StringIO())


def test_settle_index_settles_the_store_and_search_finds_the_same(rag_runtime, vectors, tmp_path, tags, people):
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(6):
        (folder / f"doc{i}.txt").write_bytes(make_text([f"Policy {i}: reimbursement of travel expenses {i}."] * 20))
    call_command("ingest_folder", str(folder), "--tag", "finance", stdout=io.StringIO(), verbosity=0)
    before = [(r.document_id, r.chunk_index) for r in vectors.search("travel expenses", user_tags=["finance"])]
    out = io.StringIO()
    call_command("settle_index", stdout=out)
    total = vectors.count()
    assert f"Settled the vector store ({total} chunks) in" in out.getvalue() and total >= 6
    after = [(r.document_id, r.chunk_index) for r in vectors.search("travel expenses", user_tags=["finance"])]
    assert after == before and after


def test_ingest_and_sync_folder_with_the_ollama_embedder(rag_runtime, settings, tmp_path, tags, people, fake_ollama):
    """The folder commands embed every file through Ollama (the fake server's /api/embed), one file
    after another on one event loop: none fails with "Event loop is closed" (a client the first
    file opened, on a loop of its own, failed the next), and the embedder keeps its connection
    (a loop per file opened one per file)."""
    from dataclasses import replace

    from ragchat import runtime

    settings.RAG = replace(rag_runtime, embedding_backend="ollama", embedding_model="nomic-embed-text")
    runtime.reset()
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):
        (folder / f"doc{i}.txt").write_bytes(
            make_text([f"Policy {i}: travel expenses are reimbursed within {i} days."])
        )

    def run(command: str) -> tuple[str, int, int]:
        out, err = io.StringIO(), io.StringIO()
        connections, embeds = fake_ollama.connections_opened, len(fake_ollama.requests_to("/api/embed"))
        call_command(command, str(folder), "--tag", "finance", stdout=out, stderr=err, verbosity=0)
        assert "0 failed" in out.getvalue() and not err.getvalue(), out.getvalue() + err.getvalue()
        return (
            out.getvalue(),
            fake_ollama.connections_opened - connections,
            len(fake_ollama.requests_to("/api/embed")) - embeds,
        )

    out, connections, embeds = run("ingest_folder")
    assert "3 indexed" in out and embeds >= 3 and connections <= 2, (connections, embeds)
    (folder / "doc3.txt").write_bytes(make_text(["Policy 3: parking passes come from reception."]))
    (folder / "doc0.txt").write_bytes(make_text(["Policy 0: travel expenses are reimbursed within a week."]))
    (folder / "doc1.txt").unlink()
    out, connections, embeds = run("sync_folder")
    assert "1 added, 1 changed, 1 unchanged, 1 removed" in out and embeds >= 2 and connections <= 1, (
        out,
        connections,
        embeds,
    )
    assert Document.objects.filter(status="ready").count() == 3
