"""The type comes from the bytes, not the name (R-DOC-7); unsupported types are named in the refusal.

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

import io
import zipfile

import pytest

from ragchat.evaluation import docgen
from ragchat.services.errors import (
    UnsupportedDocumentError,
)
from ragchat.services.parsing import detect_kind, parse_document


@pytest.mark.parametrize(
    ("data", "filename", "kind"),
    [
        (docgen.make_pdf(["x"]), "report.txt", "pdf"),
        (docgen.make_docx([("A", ["b"])]), "report.pdf", "docx"),
        (docgen.make_pptx([("A", ["b"])]), "report.docx", "pptx"),
        (docgen.make_xlsx({"A": [["a", "b"]]}), "report.pptx", "xlsx"),
        (docgen.make_odt([("A", ["b"])]), "report.xlsx", "odt"),
        (docgen.make_ods({"A": [["a", "b"]]}), "report.odt", "ods"),
        (docgen.make_odp([("A", ["b"])]), "report.ods", "odp"),
        (docgen.make_rtf(["a"]), "report.txt", "rtf"),
        (docgen.make_eml(subject="A", body="b"), "report.txt", "eml"),
        (b"a,b\n1,2\n", "report.csv", "csv"),
        (b"<!DOCTYPE html><html><body><p>x</p></body></html>", "page.md", "html"),
        (b"# Title\n\ntext", "notes.markdown", "markdown"),
        (b"# Title\n\ntext", "notes", "text"),
    ],
)
def test_type_comes_from_content_not_extension(data, filename, kind):
    assert detect_kind(data=data, filename=filename) == kind


def test_text_that_mentions_the_pdf_magic_is_still_text():
    data = b"Notes on file formats.\n\nEvery PDF starts with %PDF-1.7 in its header.\n"
    parsed = parse_document(data=data, filename="formats.txt")
    assert parsed.kind == "text"
    assert "%PDF-1.7" in parsed.text


def test_pdf_after_leading_junk_is_still_a_pdf():
    data = b"\r\n junk bytes \r\n" + docgen.make_pdf(["Late header."])
    assert detect_kind(data=data, filename="x.bin") == "pdf"


@pytest.mark.parametrize(
    ("data", "filename", "expected"),
    [
        (docgen.make_png(), "photo.png", "(.png)"),
        (docgen.make_exe(), "setup.exe", "Executable"),
        (docgen.make_png(), "invoice.pdf", "named .pdf"),
    ],
)
def test_unsupported_binary_types(data, filename, expected):
    with pytest.raises(UnsupportedDocumentError) as caught:
        parse_document(data=data, filename=filename)
    assert expected in str(caught.value)
    assert str(caught.value).endswith(
        "Upload PDF, Word (.docx), PowerPoint (.pptx), Excel (.xlsx), CSV, OpenDocument (.odt, .ods, .odp), RTF, "
        "email (.eml), HTML, Markdown or plain text."
    )


def test_text_renamed_pdf_is_refused_as_not_a_pdf():
    with pytest.raises(UnsupportedDocumentError, match="named .pdf but its content is not a PDF"):
        parse_document(data=b"just some words", filename="fake.pdf")


def test_plain_zip_is_not_a_document():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("notes.txt", "hello")
    with pytest.raises(UnsupportedDocumentError, match="ZIP archive"):
        parse_document(data=out.getvalue(), filename="notes.docx")
