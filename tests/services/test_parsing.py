"""Parsing real generated documents of each format, and refusing each kind of bad input (R-DOC-1, R-DOC-7)."""
from __future__ import annotations

import io
import zipfile

import pytest

from ragchat.services.errors import (
    CorruptDocumentError,
    DocumentError,
    DocumentTooLargeError,
    EmptyDocumentError,
    EncryptedDocumentError,
    UnsupportedDocumentError,
)
from ragchat.services.parsing import detect_kind, parse_document, safe_filename
from tests import docgen

# --------------------------------------------------------------------------------------------
# Formats
# --------------------------------------------------------------------------------------------


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


def test_docx_headings_become_sections_and_tables_are_included():
    data = docgen.make_docx(
        [("Laptops", ["Every employee gets a laptop.", "Replacements every four years."]), ("Phones", ["Phones on request."])],
        title="IT Handbook",
        table=[["Model", "Price"], ["ThinkPad T14", "1450 EUR"]],
    )
    parsed = parse_document(data=data, filename="it.docx")
    assert parsed.kind == "docx"
    assert parsed.title == "IT Handbook"
    assert parsed.pages is None
    by_text = {b.text: b.section for b in parsed.blocks}
    assert by_text["Every employee gets a laptop."] == "Laptops"
    assert by_text["Phones on request."] == "Phones"
    assert by_text["Model | Price\nThinkPad T14 | 1450 EUR"] == "Laptops"
    headings = [b.text for b in parsed.blocks if b.is_heading]
    assert headings == ["IT Handbook", "Laptops", "Phones"]


def test_docx_subheadings_are_sections_too():
    data = docgen.make_docx([("Scope", ["Applies to all staff."])], heading_level=3)
    parsed = parse_document(data=data, filename="x.docx")
    assert [(b.text, b.section) for b in parsed.blocks] == [("Scope", "Scope"), ("Applies to all staff.", "Scope")]


def test_html_main_text_and_headings_without_script_style_or_navigation():
    data = docgen.make_html(
        [("Opening hours", ["The office opens at 8:00."]), ("Parking", ["Use level -2 of the garage."])],
        title="Office Guide",
        script="alert(1)",
    )
    parsed = parse_document(data=data, filename="guide.html")
    assert parsed.kind == "html"
    assert parsed.title == "Office Guide"
    assert [(b.text, b.section) for b in parsed.blocks] == [
        ("Opening hours", "Opening hours"),
        ("The office opens at 8:00.", "Opening hours"),
        ("Parking", "Parking"),
        ("Use level -2 of the garage.", "Parking"),
    ]
    everything = parsed.text
    for hidden in ("alert(1)", "font-family", "hidden-style-text", "enable JavaScript", "Site menu link", "Copyright footer"):
        assert hidden not in everything


def test_html_without_main_uses_body_and_drops_inline_handlers_text():
    page = (
        b"<html><body><h1>Notice</h1><p onclick=\"steal()\">Fire drill on <b>Friday</b>.</p>"
        b"<script>document.write('injected')</script><template><p>template text</p></template>"
        b"<!-- secret comment --><table><tr><td>Room</td><td>B12</td></tr></table></body></html>"
    )
    parsed = parse_document(data=page, filename="notice.txt")  # extension lies; content is HTML
    assert parsed.kind == "html"
    assert [b.text for b in parsed.blocks] == ["Notice", "Fire drill on Friday.", "Room | B12"]
    assert "injected" not in parsed.text and "template text" not in parsed.text
    assert "secret comment" not in parsed.text and "steal" not in parsed.text


def test_markdown_headings_sections_and_code_blocks_kept():
    data = docgen.make_markdown(
        [("Setup", ["Install the **VPN** client from [the portal](https://intranet/vpn)."]), ("Usage", ["Connect daily."])],
        title="VPN Guide",
        code="vpn connect --profile office",
    )
    parsed = parse_document(data=data, filename="vpn.md")
    assert parsed.kind == "markdown"
    assert parsed.mime_type == "text/markdown"
    assert parsed.title == "VPN Guide"
    sections = {b.text: b.section for b in parsed.blocks}
    assert sections["Install the VPN client from the portal."] == "Setup"
    assert sections["Connect daily."] == "Usage"
    assert sections["vpn connect --profile office"] == "Usage"


def test_markdown_inline_script_is_not_text():
    data = b"# Notes\n\nSafe text.\n\n<script>alert(1)</script>\n\nMore <span>text</span> here.\n"
    parsed = parse_document(data=data, filename="notes.md")
    assert "alert(1)" not in parsed.text
    assert "More text here." in [b.text for b in parsed.blocks]


def test_plain_text_paragraphs_and_title():
    data = docgen.make_text(["Canteen rules", "Lunch is served from 12:00 to 14:00.", "Bring your badge."])
    parsed = parse_document(data=data, filename="canteen.txt")
    assert parsed.kind == "text"
    assert parsed.title == "Canteen rules"
    assert [b.text for b in parsed.blocks] == ["Canteen rules", "Lunch is served from 12:00 to 14:00.", "Bring your badge."]
    assert parsed.warnings == []
    assert all(b.page_number is None and b.section is None for b in parsed.blocks)


def test_non_utf8_text_is_decoded_with_a_warning():
    data = docgen.make_text(["Café menu", "Crème brûlée costs 5 €."], encoding="cp1252")
    parsed = parse_document(data=data, filename="menu.txt")
    assert [b.text for b in parsed.blocks] == ["Café menu", "Crème brûlée costs 5 €."]
    assert len(parsed.warnings) == 1 and "not UTF-8" in parsed.warnings[0]


def test_utf16_text_with_bom_is_text_not_binary():
    data = "Quarterly report\n\nRevenue grew.".encode("utf-16")
    parsed = parse_document(data=data, filename="report.txt")
    assert [b.text for b in parsed.blocks] == ["Quarterly report", "Revenue grew."]


@pytest.mark.parametrize(
    ("data", "filename", "kind"),
    [
        (docgen.make_pdf(["x"]), "report.txt", "pdf"),
        (docgen.make_docx([("A", ["b"])]), "report.pdf", "docx"),
        (b"<!DOCTYPE html><html><body><p>x</p></body></html>", "page.md", "html"),
        (b"# Title\n\ntext", "notes.markdown", "markdown"),
        (b"# Title\n\ntext", "notes", "text"),
    ],
)
def test_type_comes_from_content_not_extension(data, filename, kind):
    assert detect_kind(data=data, filename=filename) == kind


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------


def test_over_the_size_limit():
    with pytest.raises(DocumentTooLargeError, match=r"the limit is 1\.0 MB"):
        parse_document(data=b"a" * (1024 * 1024 + 1), filename="big.txt", max_bytes=1024 * 1024)


@pytest.mark.parametrize("data", [b"", b"   \n\t  "])
def test_empty_file(data):
    with pytest.raises(EmptyDocumentError, match="empty"):
        parse_document(data=data, filename="empty.txt")


def test_document_with_only_markup_is_empty():
    with pytest.raises(EmptyDocumentError, match="no readable text"):
        parse_document(data=b"<html><body><script>alert(1)</script></body></html>", filename="x.html")


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
    assert "Upload PDF, Word (.docx), HTML, Markdown or plain text." in str(caught.value)


def test_text_renamed_pdf_is_refused_as_not_a_pdf():
    with pytest.raises(UnsupportedDocumentError, match="named .pdf but its content is not a PDF"):
        parse_document(data=b"just some words", filename="fake.pdf")


def test_plain_zip_is_not_a_document():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("notes.txt", "hello")
    with pytest.raises(UnsupportedDocumentError, match="ZIP archive"):
        parse_document(data=out.getvalue(), filename="notes.docx")


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


def test_scanned_pdf_without_text_mentions_ocr():
    with pytest.raises(EmptyDocumentError, match=r"OCR\) is not supported"):
        parse_document(data=docgen.make_scanned_pdf(), filename="scan.pdf")


def test_docx_zip_bomb_refused_by_compression_ratio():
    with pytest.raises(DocumentTooLargeError, match="zip bomb"):
        parse_document(data=docgen.make_zip_bomb_docx(), filename="bomb.docx")


def test_docx_refused_when_declared_unpacked_size_is_over_the_limit():
    data = docgen.make_zip_bomb_docx(padding_bytes=3 * 1024 * 1024)  # under the ratio floor
    with pytest.raises(DocumentTooLargeError, match=r"unpacks to [\d.]+ MB, over the 2.0 MB limit"):
        parse_document(data=data, filename="big.docx", max_unpacked_bytes=2 * 1024 * 1024)
    # the same file under a normal limit is an ordinary document
    assert parse_document(data=data, filename="big.docx").blocks[-1].text == "Nothing to see here."


def test_damaged_docx_is_corrupt():
    data = docgen.make_docx([("A", ["b"])])
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            body = source.read(item.filename)
            target.writestr(item, b"<w:document broken" if item.filename == "word/document.xml" else body)
    with pytest.raises(CorruptDocumentError, match="Word document is damaged"):
        parse_document(data=out.getvalue(), filename="broken.docx")


def test_every_refusal_is_a_document_error_with_a_sentence():
    bad_inputs = [
        (b"", "a.txt"),
        (docgen.make_png(), "a.pdf"),
        (docgen.make_corrupt_pdf(), "a.pdf"),
        (docgen.make_pdf(["x"], encrypt_password="p"), "a.pdf"),
        (docgen.make_scanned_pdf(), "a.pdf"),
    ]
    for data, filename in bad_inputs:
        with pytest.raises(DocumentError) as caught:
            parse_document(data=data, filename=filename)
        message = str(caught.value)
        assert message[0].isupper() and message.endswith(".") and "Error" not in message


# --------------------------------------------------------------------------------------------
# Filenames
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("../../etc/passwd", "passwd"),
        ("/etc/shadow", "shadow"),
        ("..\\..\\Windows\\system.ini", "system.ini"),
        ("a\x00b.pdf", "ab.pdf"),
        ("tab\there\n.txt", "tab here.txt"),
        ("..", "document"),
        ("", "document"),
        ("   ", "document"),
        ("CON.txt", "_CON.txt"),
        ("report\u202egpj.exe", "reportgpj.exe"),  # right-to-left override spoofing an extension
        ("e\u0301te\u0301.md", "\u00e9t\u00e9.md"),  # NFC
        ('what?<>:"|*.txt', "what_______.txt"),
        (".hidden", "hidden"),
    ],
)
def test_safe_filename(name, expected):
    assert safe_filename(name) == expected


def test_safe_filename_caps_long_names_and_keeps_the_extension():
    result = safe_filename("x" * 500 + ".pdf")
    assert len(result) == 150 and result.endswith(".pdf")
    wide = safe_filename("\U0001f600" * 200 + ".docx")
    assert wide.endswith(".docx") and len(wide.encode("utf-8")) <= 240


def test_safe_filename_accepts_undecodable_bytes():
    assert safe_filename(b"r\xe9sum\xe9.pdf") == "r\ufffdsum\ufffd.pdf"


def test_text_that_mentions_the_pdf_magic_is_still_text():
    data = b"Notes on file formats.\n\nEvery PDF starts with %PDF-1.7 in its header.\n"
    parsed = parse_document(data=data, filename="formats.txt")
    assert parsed.kind == "text"
    assert "%PDF-1.7" in parsed.text


def test_pdf_after_leading_junk_is_still_a_pdf():
    data = b"\r\n junk bytes \r\n" + docgen.make_pdf(["Late header."])
    assert detect_kind(data=data, filename="x.bin") == "pdf"


def test_office_export_title_is_cleaned():
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(docgen.make_pdf(["Body."]))))
    writer.add_metadata({"/Title": "Microsoft Word - Budget 2026.docx"})
    out = io.BytesIO()
    writer.write(out)
    assert parse_document(data=out.getvalue(), filename="b.pdf").title == "Budget 2026"
