"""Every bad input of R-DOC-7 gets a clear message and loses nothing else.

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

import pytest

from documents import services
from documents.models import Document
from ragchat.evaluation.docgen import (
    make_corrupt_pdf,
    make_exe,
    make_html,
    make_pdf,
    make_png,
    make_text,
    make_zip_bomb_docx,
)

pytestmark = pytest.mark.django_db


def _refused(people, tags, data, filename):
    with pytest.raises(services.UploadRefused) as refused:
        services.document_create(user=people["owner"], data=data, filename=filename, tags=[tags["finance"]])
    assert Document.objects.count() == 0
    return str(refused.value)


def test_over_the_size_limit(people, tags, settings):
    settings.RAGCHAT_MAX_UPLOAD_BYTES = 1000
    message = _refused(people, tags, make_text(["x" * 2000]), "big.txt")
    assert "limit" in message and "big.txt" in message


def test_empty_file(people, tags):
    assert "empty" in _refused(people, tags, b"", "empty.txt")
    assert "empty" in _refused(people, tags, b"  \n\t ", "blank.txt")


def test_unsupported_type(people, tags):
    message = _refused(people, tags, make_png(), "picture.png")
    assert "not a supported document" in message


def test_binary_renamed_pdf(people, tags):
    message = _refused(people, tags, make_exe(), "report.pdf")
    assert "report.pdf" in message and "not a supported document" in message


def test_text_renamed_pdf(people, tags):
    assert "not a PDF" in _refused(people, tags, b"just some words", "fake.pdf")


def test_no_tag_and_forbidden_tag(people, tags):
    with pytest.raises(services.UploadRefused, match="at least one tag"):
        services.document_create(user=people["owner"], data=b"hello", filename="a.txt", tags=[])
    with pytest.raises(services.UploadRefused, match="may not upload to: HR"):
        services.document_create(user=people["owner"], data=b"hello", filename="a.txt", tags=[tags["hr"]])
    with pytest.raises(services.UploadRefused, match="may not upload"):
        services.document_create(user=people["member"], data=b"hello", filename="a.txt", tags=[tags["finance"]])


@pytest.mark.parametrize(
    ("make", "filename", "expected"),
    [
        (make_corrupt_pdf, "broken.pdf", "damaged"),
        (lambda: make_pdf(["Secret text"], encrypt_password="s3cret"), "locked.pdf", "password-protected"),
        (make_zip_bomb_docx, "bomb.docx", "zip bomb"),
    ],
    ids=["corrupt-pdf", "encrypted-pdf", "zip-bomb-docx"],
)
def test_unreadable_files_fail_with_reason_and_no_vectors(upload, vectors, make, filename, expected):
    good = upload(make_text(["A good document stays."]), "good.txt")
    document = upload(make(), filename)
    assert document.status == Document.Status.FAILED
    assert expected in document.error
    assert vectors.count(document_id=str(document.id)) == 0
    good.refresh_from_db()
    assert good.status == "ready" and vectors.count(document_id=str(good.id)) == good.chunk_count


@pytest.mark.parametrize(
    "filename",
    [
        "../../etc/passwd.txt",
        "..\\..\\windows\\evil.txt",
        "nul\x00byte.txt",
        "x" * 600 + ".txt",
        b"caf\xe9-menu.txt".decode("latin-1"),
        "\u202eevil\u202dtxt.exe.txt",
    ],
    ids=["dotdot", "backslashes", "nul", "very-long", "non-utf8", "bidi"],
)
def test_hostile_file_names_are_made_safe(upload, filename):
    document = upload(make_text([f"Content for {len(filename)}"]), filename)
    assert document.status == "ready"
    name = document.original_filename
    assert "/" not in name and "\\" not in name and "\x00" not in name and ".." not in name.strip(".")[:2]
    assert len(name) <= 150
    assert name.endswith(".txt")
    # the stored path is the document's id, never the user's name
    assert document.file.name == f"originals/default/{document.id}.txt"


def test_non_utf8_bytes_name(people, tags, rag_runtime):
    document = services.document_create(
        user=people["owner"],
        data=b"hello there",
        filename=b"r\xe9sum\xe9.txt".decode("utf-8", "replace"),
        tags=[tags["finance"]],
    )
    assert document.original_filename.endswith(".txt")


def test_html_with_script_is_never_rendered_raw(upload, client, people, vectors):
    payload = "<script>window.__pwned = 1</script>"
    data = make_html(
        [("Hello <b>team</b>", ["Text with " + payload + " inside."])],
        title="<img src=x onerror=alert(1)>",
        script="alert(1)",
    )
    document = upload(data, "<script>alert(2)</script>.html")
    assert document.status == "ready"
    client.force_login(people["owner"])
    for url in ("/documents/", f"/documents/{document.id}/", f"/documents/{document.id}/row"):
        body = client.get(url).content.decode()
        assert "<script>alert(2)" not in body and "<img src=x" not in body and "<script>window" not in body
        assert "&lt;img src=x onerror=alert(1)&gt;" in body or "&lt;script&gt;" in body
    download = client.get(f"/documents/{document.id}/file")
    assert download["Content-Type"] == "application/octet-stream"
    assert download["Content-Disposition"].startswith("attachment")
    assert "sandbox" in download["Content-Security-Policy"]
