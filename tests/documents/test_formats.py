"""Slides, spreadsheets, OpenDocument, RTF and saved emails through every way in (the upload page,
the API, folder sync): the same checks, the same pipeline, chunks searchable under the tags; an
email's attachments become documents of their own; hostile files fail with a sentence and leave
no vectors."""

from __future__ import annotations

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client

from documents.models import Document
from ragchat.evaluation import docgen

pytestmark = pytest.mark.django_db

MATRIX = [["Amount", "Approval"], ["Up to 5,000 GBP", "Line manager"], ["Above 5,000 GBP", "Finance director"]]
FILES = {
    "deck.pptx": lambda: docgen.make_pptx([("Kick-off", ["Welcome aboard."]), ("Approvals", [])], tables={1: MATRIX}),
    "prices.xlsx": lambda: docgen.make_xlsx({"Prices": [["Item", "Price"], ["Stapler", "12 GBP"]]}),
    "prices.csv": lambda: docgen.make_csv([["Item", "Price"], ["Desk lamp", "35 GBP"]]),
    "rules.odt": lambda: docgen.make_odt([("Rules", ["Receipts are kept for seven years."])]),
    "sheet.ods": lambda: docgen.make_ods({"Rooms": [["Room", "Seats"], ["Fjord", 12]]}),
    "talk.odp": lambda: docgen.make_odp([("Town hall", ["Results of the quarter."])]),
    "memo.rtf": lambda: docgen.make_rtf(["Memo", "The canteen opens at 11:30."]),
    "mail.eml": lambda: docgen.make_eml(subject="Parking", body="The car park closes at 20:00."),
}
KINDS = {"deck.pptx": "pptx", "prices.xlsx": "xlsx", "prices.csv": "csv", "rules.odt": "odt", "sheet.ods": "ods"}
KINDS |= {"talk.odp": "odp", "memo.rtf": "rtf", "mail.eml": "eml"}


def _search(vectors, query, document):
    return [r for r in vectors.search(query, user_tags=["finance"], limit=50) if r.document_id == str(document.id)]


def test_every_new_format_uploads_through_the_page_and_is_searchable(client, people, tags, vectors, rag_runtime):
    client.force_login(people["owner"])
    page = client.get("/documents/").content.decode()
    assert ".pptx" in page and ".xlsx" in page and ".eml" in page and ".odt" in page
    files = [SimpleUploadedFile(name, make()) for name, make in FILES.items()]
    response = client.post("/documents/upload", {"files": files, "tags": [tags["finance"].pk]}, HTTP_HX_REQUEST="true")
    assert f"{len(FILES)} files uploaded" in response.content.decode()
    for name, kind in KINDS.items():
        document = Document.objects.get(original_filename=name)
        assert document.status == Document.Status.READY, (name, document.error)
        assert document.kind == kind and document.chunk_count > 0
        assert vectors.count(document_id=str(document.id)) == document.chunk_count
    deck = Document.objects.get(original_filename="deck.pptx")
    assert deck.pages == 2
    rows = _search(vectors, "approval above 5,000 GBP", deck)
    top = next(r for r in rows if "Finance director" in r.chunk_text)
    assert top.page_number == 2 and top.section == "Approvals"
    assert "Amount: Above 5,000 GBP | Approval: Finance director" in top.chunk_text


def test_the_api_takes_the_new_formats_too(people, tags, rag_runtime):
    from api.services import token_create

    secret = token_create(user=people["owner"], name="u", scopes=["upload", "read"], expires_in_days=None).secret
    api = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    upload = SimpleUploadedFile("prices.xlsx", FILES["prices.xlsx"]())
    response = api.post("/api/v1/documents", {"tags": "finance", "files": upload})
    assert response.status_code in (200, 201, 202), response.content
    document = Document.objects.get(original_filename="prices.xlsx")
    assert document.status == Document.Status.READY and document.kind == "xlsx"


def test_folder_sync_reads_the_new_formats(rag_runtime, vectors, tmp_path, tags, people):
    folder = tmp_path / "share"
    folder.mkdir()
    for name in ("deck.pptx", "prices.csv", "memo.rtf"):
        (folder / name).write_bytes(FILES[name]())
    call_command("sync_folder", str(folder), "--tag", "finance", stdout=io.StringIO(), stderr=io.StringIO())
    synced = Document.objects.filter(source_kind="folder")
    assert sorted(d.kind for d in synced) == ["csv", "pptx", "rtf"]
    assert all(d.status == Document.Status.READY for d in synced)


def test_email_attachments_become_documents_of_their_own_under_the_same_tags(upload, vectors, tags, people):
    data = docgen.make_eml(
        subject="Supplier prices",
        body="The new price list is attached.",
        attachments=[
            ("prices.csv", docgen.make_csv([["Item", "Price"], ["Toner", "49 GBP"]])),
            ("plan.docx", docgen.make_docx([("Plan", ["Order toner monthly."])])),
            ("logo.png", docgen.make_png()),
        ],
    )
    email = upload(data, "supplier.eml", tag_names=("finance", "hr"), user=people["admin"])
    assert email.status == Document.Status.READY and email.title == "Supplier prices"
    assert len(email.warnings) == 1 and email.warnings[0].startswith("Attachment logo.png: This file")
    children = Document.objects.exclude(pk=email.pk)
    assert sorted(c.original_filename for c in children) == ["plan.docx", "prices.csv"]
    for child in children:
        assert child.status == Document.Status.READY, child.error
        assert sorted(child.tags.values_list("slug", flat=True)) == ["finance", "hr"]
        assert child.uploaded_by == email.uploaded_by
        assert vectors.count(document_id=str(child.id)) == child.chunk_count > 0
    csv_doc = children.get(original_filename="prices.csv")
    assert any("Item: Toner | Price: 49 GBP" in r.chunk_text for r in _search(vectors, "toner price", csv_doc))
    # indexing the email again does not copy its attachments again
    from documents import services

    services.document_requeue(document=email)
    services.document_ingest_sync(email.id)
    email.refresh_from_db()
    assert Document.objects.count() == 3 and email.status == Document.Status.READY
    assert len(email.warnings) == 1


@pytest.mark.parametrize(
    ("make", "filename", "expected"),
    [
        (
            lambda: docgen.add_zip_padding(docgen.make_pptx([("x", ["y"])]), "ppt/media/pad.bin"),
            "bomb.pptx",
            "zip bomb",
        ),
        (
            lambda: docgen.add_zip_padding(docgen.make_ods({"A": [["a", "b"], ["1", "2"]]}), "Pictures/pad.bin"),
            "bomb.ods",
            "zip bomb",
        ),
    ],
    ids=["zip-bomb-pptx", "zip-bomb-ods"],
)
def test_hostile_office_files_fail_with_reason_and_no_vectors(upload, vectors, make, filename, expected):
    document = upload(make(), filename)
    assert document.status == Document.Status.FAILED and expected in document.error
    assert vectors.count(document_id=str(document.id)) == 0


def test_password_protected_office_file_is_refused_at_upload(people, tags):
    from msoffcrypto.format.ooxml import OOXMLFile

    from documents import services

    out = io.BytesIO()
    OOXMLFile(io.BytesIO(FILES["prices.xlsx"]())).encrypt("secret", out)
    with pytest.raises(services.UploadRefused, match="locked.xlsx: This Office file is password-protected"):
        services.document_create(
            user=people["owner"], data=out.getvalue(), filename="locked.xlsx", tags=[tags["finance"]]
        )
    assert not Document.objects.exists()


def test_the_admin_reindexes_the_new_formats(admin_client, upload, vectors):
    documents = [upload(FILES[name](), name) for name in ("deck.pptx", "sheet.ods", "mail.eml")]
    response = admin_client.post(
        "/admin/documents/document/",
        {"action": "reindex", "_selected_action": [d.pk for d in documents]},
        follow=True,
    )
    assert "Re-indexing 3 document" in response.content.decode()
    for document in documents:
        document.refresh_from_db()
        assert document.status == Document.Status.READY, document.error
        assert vectors.count(document_id=str(document.id)) == document.chunk_count > 0
