"""PDF: pages, outline sections and metadata titles; damaged, encrypted and scanned files refused."""

from __future__ import annotations

import io

import pytest

from ragchat.evaluation import docgen
from ragchat.services.errors import (
    CorruptDocumentError,
    EmptyDocumentError,
    EncryptedDocumentError,
)
from ragchat.services.parsing import parse_document


def test_pdf_keeps_page_numbers_sections_and_title():
    data = docgen.make_pdf(
        ["Travel policy overview. Book trains first.", "Hotels up to 120 EUR per night.", "Claims within 30 days."],
        title="Travel Policy",
        sections=["Overview", None, "Claims"],
    )
    parsed = parse_document(data=data, filename="travel.pdf")
    assert parsed.kind == "pdf"
    assert parsed.mime_type == "application/pdf"
    assert parsed.pages == 3
    assert parsed.title == "Travel Policy"
    assert [(b.page_number, b.section) for b in parsed.blocks] == [(1, "Overview"), (2, "Overview"), (3, "Claims")]
    assert "120 EUR per night" in parsed.blocks[1].text
    assert parsed.warnings == []


def test_pdf_with_a_blank_page_warns_and_keeps_the_others():
    data = docgen.make_pdf(["Page one has text.", "", "Page three has text."])
    parsed = parse_document(data=data, filename="gaps.pdf")
    assert [b.page_number for b in parsed.blocks] == [1, 3]
    assert any("page(s) 2" in warning for warning in parsed.warnings)


def test_office_export_title_is_cleaned():
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(docgen.make_pdf(["Body."]))))
    writer.add_metadata({"/Title": "Microsoft Word - Budget 2026.docx"})
    out = io.BytesIO()
    writer.write(out)
    assert parse_document(data=out.getvalue(), filename="b.pdf").title == "Budget 2026"


def test_corrupt_pdf():
    with pytest.raises(CorruptDocumentError, match="damaged or incomplete"):
        parse_document(data=docgen.make_corrupt_pdf(), filename="cut.pdf")


def test_pdf_header_followed_by_garbage_is_corrupt():
    with pytest.raises(CorruptDocumentError):
        parse_document(data=b"%PDF-1.7\n" + bytes(range(256)) * 8, filename="junk.pdf")


def test_encrypted_pdf():
    data = docgen.make_pdf(["Salaries 2025."], encrypt_password="s3cret")
    with pytest.raises(EncryptedDocumentError) as caught:
        parse_document(data=data, filename="salaries.pdf")
    assert str(caught.value) == "This PDF is password-protected; remove the password and upload it again."


def test_pdf_of_drawings_without_text_mentions_ocr():
    with pytest.raises(EmptyDocumentError, match=r"not even by text recognition \(OCR\)"):
        parse_document(data=docgen.make_scanned_pdf(), filename="scan.pdf")
