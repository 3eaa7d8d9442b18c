"""manage.py sync_folder: a temp folder changed between syncs mirrors into the index (added,
changed, removed, unchanged-untouched), idempotently, with a progress bar and a summary."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from documents.models import Document
from ragchat.evaluation import docgen

pytestmark = pytest.mark.django_db


def sync(folder, *args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("sync_folder", str(folder), "--tag", "finance", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def by_name(folder) -> dict[str, Document]:
    return {
        d.source_path.removeprefix(str(folder.resolve()) + "/"): d
        for d in Document.objects.filter(source_kind="folder")
    }


def test_folder_mirror_adds_changes_removes_and_leaves_unchanged_untouched(
    rag_runtime, vectors, tmp_path, tags, people
):
    folder = tmp_path / "share"
    (folder / "policies").mkdir(parents=True)
    (folder / "policies" / "travel.md").write_text("# Travel\n\nTrains are booked in second class.\n")
    (folder / "leave.txt").write_text("Employees get twenty-five days of paid leave per year.\n")
    (folder / "budget.pdf").write_bytes(docgen.make_pdf(["The 2026 budget for tools is 40,000 euros."]))
    (folder / ".hidden").write_text("never synced")

    out, err = sync(folder)
    assert "3 files: 3 added, 0 changed, 0 unchanged, 0 removed" in out, out + err
    first = by_name(folder)
    assert sorted(first) == ["budget.pdf", "leave.txt", "policies/travel.md"]
    assert all(d.status == "ready" for d in first.values())
    chunks = vectors.count()

    out, _ = sync(folder)  # idempotent: nothing changed, nothing touched
    assert "3 files: 0 added, 0 changed, 3 unchanged, 0 removed (0 chunks indexed)" in out
    assert {k: (d.version, d.updated_at) for k, d in by_name(folder).items()} == {
        k: (d.version, d.updated_at) for k, d in first.items()
    }
    assert vectors.count() == chunks

    (folder / "leave.txt").write_text("Employees now get twenty-eight days of paid leave per year.\n")
    (folder / "policies" / "travel.md").unlink()
    (folder / "expenses.md").write_text("# Expenses\n\nHotels cost at most 140 euros a night.\n")
    out, err = sync(folder)
    assert "3 files: 1 added, 1 changed, 1 unchanged, 1 removed" in out, out + err
    second = by_name(folder)
    assert sorted(second) == ["budget.pdf", "expenses.md", "leave.txt"]
    assert second["leave.txt"].version == 2 and second["leave.txt"].pk == first["leave.txt"].pk
    assert (second["budget.pdf"].version, second["budget.pdf"].updated_at) == (1, first["budget.pdf"].updated_at)
    assert vectors.count(document_id=str(first["policies/travel.md"].pk)) == 0
    hits = vectors.search("twenty-eight days paid leave", user_tags=["finance"])
    assert any("twenty-eight" in h.chunk_text for h in hits)
    assert vectors.count() == sum(d.chunk_count for d in second.values())


def test_bad_input_is_refused_and_loses_nothing(rag_runtime, vectors, tmp_path, tags, people):
    folder = tmp_path / "share"
    folder.mkdir()
    (folder / "leave.txt").write_text("Employees get twenty-five days of paid leave per year.\n")
    sync(folder)
    (folder / "broken.pdf").write_bytes(docgen.make_corrupt_pdf())
    (folder / "image.png").write_bytes(docgen.make_png())
    out, err = sync(folder)
    assert "1 unchanged" in out and "1 refused, 1 failed" in out
    assert "image.png" in err and "broken.pdf" in err
    with pytest.raises(CommandError, match="not a folder"):  # an unmounted share empties nothing
        sync(tmp_path / "missing")
    assert Document.objects.filter(source_kind="folder", status="ready").count() == 1
    with pytest.raises(CommandError, match="tag"):
        call_command("sync_folder", str(folder), stdout=io.StringIO())


def test_configured_folders(rag_runtime, tmp_path, tags, people, settings):
    folder = tmp_path / "configured"
    folder.mkdir()
    (folder / "note.txt").write_text("The canteen opens at 11:30 on weekdays.\n")
    settings.RAGCHAT_SYNC_FOLDERS = f"{folder}=finance,public"
    out = io.StringIO()
    call_command("sync_folder", "--configured", stdout=out, stderr=io.StringIO())
    assert "1 added" in out.getvalue()
    document = Document.objects.get(source_kind="folder")
    assert sorted(document.tags.values_list("slug", flat=True)) == ["finance", "public"]


def test_documents_list_filters_by_source(client, rag_runtime, tmp_path, tags, people, upload):
    folder = tmp_path / "share"
    folder.mkdir()
    (folder / "synced-note.txt").write_text("The canteen opens at 11:30 on weekdays.\n")
    sync(folder)
    upload(b"Uploaded by hand: the printer is on floor 2.\n", "uploaded-note.txt")
    client.force_login(people["owner"])
    synced = client.get("/documents/?source=folder").content.decode()
    assert "synced-note" in synced and "uploaded-note" not in synced and str(folder.resolve()) in synced
    uploaded = client.get("/documents/?source=upload").content.decode()
    assert "uploaded-note" in uploaded and "synced-note" not in uploaded
