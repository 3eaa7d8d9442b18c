"""Hostile files of the office formats: refused with a sentence, or contained within the limits."""

from __future__ import annotations

import io
import time
import zipfile

import pytest

from ragchat.evaluation import docgen
from ragchat.services.errors import (
    CorruptDocumentError,
    DocumentTooLargeError,
    EncryptedDocumentError,
    UnsupportedDocumentError,
)
from ragchat.services.parsing import DEFAULT_MAX_BYTES, parse_document
from ragchat.services.parsing.eml import MAX_ATTACHMENTS


@pytest.mark.parametrize(
    ("data", "member", "what"),
    [
        (docgen.make_pptx([("Harmless", ["Nothing here."])]), "ppt/media/padding.bin", "PowerPoint file"),
        (docgen.make_xlsx({"A": [["x", "y"], ["1", "2"]]}), "xl/media/padding.bin", "Excel file"),
        (docgen.make_odt([("Harmless", ["Nothing here."])]), "Pictures/padding.bin", "OpenDocument text file"),
        (docgen.make_ods({"A": [["x", "y"], ["1", "2"]]}), "Pictures/padding.bin", "OpenDocument spreadsheet file"),
    ],
)
def test_zip_bombs_are_refused_before_inflating(data, member, what):
    bomb = docgen.add_zip_padding(data, member)
    with pytest.raises(DocumentTooLargeError, match=f"This {what} is compressed suspiciously hard"):
        parse_document(data=bomb, filename="bomb")


def test_password_protected_office_file_gets_its_sentence():
    from msoffcrypto.format.ooxml import OOXMLFile

    for plain in (docgen.make_xlsx({"A": [["x", "y"], ["1", "2"]]}), docgen.make_pptx([("Secret", ["x"])])):
        out = io.BytesIO()
        OOXMLFile(io.BytesIO(plain)).encrypt("secret", out)
        with pytest.raises(EncryptedDocumentError, match="password-protected; remove the password"):
            parse_document(data=out.getvalue(), filename="locked.xlsx")


def test_password_protected_opendocument_gets_its_sentence():
    """LibreOffice encrypts the members and says so in the manifest with <manifest:encryption-data>."""
    data = docgen.make_odt([("Secret", ["x"])])
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            body = source.read(item.filename)
            if item.filename == "META-INF/manifest.xml":
                body = body.replace(
                    b'manifest:full-path="content.xml" manifest:media-type="text/xml"/>',
                    b'manifest:full-path="content.xml" manifest:media-type="text/xml"><manifest:encryption-data manifest:checksum-type="SHA1/1K" '
                    b'manifest:checksum="x"/></manifest:file-entry>',
                )
            target.writestr(item, body)
    with pytest.raises(EncryptedDocumentError, match="OpenDocument text file is password-protected"):
        parse_document(data=out.getvalue(), filename="locked.odt")


def test_outlook_msg_and_old_binary_office_files_are_named():
    import olefile  # noqa: F401  (msoffcrypto's dependency; proves the container format is what we sniff)

    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504)
    with pytest.raises(UnsupportedDocumentError, match=r"Outlook \.msg files are not supported"):
        parse_document(data=ole + "__substg1.0_0037001F".encode("utf-16-le"), filename="mail.msg")
    with pytest.raises(UnsupportedDocumentError, match=r"old Microsoft Office file \(\.doc/\.xls/\.ppt\)"):
        parse_document(data=ole + b"WordDocument", filename="old.doc")


def test_a_million_styled_empty_rows_are_contained():
    data = docgen.make_xlsx_styled_empty_rows(1_000_000)
    started = time.perf_counter()
    parsed = parse_document(data=data, filename="styled.xlsx")
    assert time.perf_counter() - started < 10
    assert [b.text for b in parsed.blocks] == ["Data", "Item: Stapler | Price: 12 GBP"]
    assert parsed.warnings == ["Sheet “Data”: reading stopped at row 1,002 after 1,000 empty rows."]
    ods = parse_document(
        data=docgen.make_ods({"Data": [["Item", "Price"], ["Stapler", "12 GBP"]]}, empty_repeated_rows=1_048_000),
        filename="styled.ods",
    )
    assert [b.text for b in ods.blocks] == ["Data", "Item: Stapler | Price: 12 GBP"]


def test_a_100000_row_sheet_is_read_and_one_more_row_is_refused_with_a_sentence():
    rows = [
        ["Item", "Price", "Supplier"],
        *[[f"Item {i}", f"{i % 500} GBP", f"Supplier {i % 37}"] for i in range(100_000)],
    ]
    data = docgen.make_csv(rows)
    assert len(data) < DEFAULT_MAX_BYTES
    started = time.perf_counter()
    parsed = parse_document(data=data, filename="items.csv")
    assert time.perf_counter() - started < 20
    row_blocks = [b for b in parsed.blocks if b.is_row]
    assert len(row_blocks) == 100_000
    assert row_blocks[-1].text == "Item: Item 99999 | Price: 499 GBP | Supplier: Supplier 25"
    with pytest.raises(DocumentTooLargeError, match="more than 100,000 rows with data, more than can be searched"):
        parse_document(data=docgen.make_csv([*rows, ["Item 100000", "1 GBP", "Supplier 1"]]), filename="items.csv")


def test_odf_run_of_spaces_is_capped():
    data = docgen.make_odt([("Spaces", ["a"])])
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            body = source.read(item.filename)
            if item.filename == "content.xml":
                body = body.replace(b">a</text:p>", b'>a<text:s text:c="2000000000"/>b</text:p>')
            target.writestr(item, body)
    parsed = parse_document(data=out.getvalue(), filename="spaces.odt")
    assert parsed.blocks[-1].text == "a b"


def test_email_with_200_attachments_keeps_the_first_ones_and_says_so():
    attachments = [(f"note-{i}.txt", f"Attachment number {i}.".encode()) for i in range(200)]
    parsed = parse_document(
        data=docgen.make_eml(subject="Many files", body="See attached.", attachments=attachments), filename="m.eml"
    )
    assert len(parsed.attachments) == MAX_ATTACHMENTS
    assert parsed.warnings == [
        f"This email has 200 attachments; the first {MAX_ATTACHMENTS} were added as documents of their own, "
        "the others were not."
    ]


def test_external_links_and_macros_are_never_followed():
    """A workbook whose formula points at another file on a server: the saved value is read, the
    link is not opened (openpyxl is told not to keep links); a deck with a macro part reads as text."""
    data = docgen.make_xlsx(
        {"Rates": [["Currency", "Rate"], ["EUR", None]]},
        formulas={("Rates", "B2"): ("='\\\\fileserver\\share\\[rates.xlsx]Sheet1'!A1", 1.17)},
    )
    parsed = parse_document(data=data, filename="rates.xlsx")
    assert [b.text for b in parsed.blocks if b.is_row] == ["Currency: EUR | Rate: 1.17"]
    deck = docgen.add_zip_padding(docgen.make_pptx([("Macro deck", ["Text stays readable."])]), "ppt/vbaProject.bin", 1)
    assert "Text stays readable." in parse_document(data=deck, filename="m.pptm").text


def _with_entity(data: bytes, member: str) -> bytes:
    """The member declares an external entity (XXE) pointing at a file of the server and uses it."""
    doctype = b'<!DOCTYPE x [<!ENTITY secret SYSTEM "file:///etc/hostname">]>'
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            body = source.read(item.filename)
            if item.filename == member:
                body = body.replace(b"?>", b"?>" + doctype, 1).replace(b">Hello<", b">Hello &secret;<", 1)
            target.writestr(item, body)
    return out.getvalue()


@pytest.mark.parametrize(
    ("data", "member", "refusal"),
    [
        (docgen.make_pptx([("Title", ["Hello"])]), "ppt/slides/slide1.xml", None),
        (docgen.make_docx([("Title", ["Hello"])]), "word/document.xml", None),
        (docgen.make_xlsx({"A": [["Item", "Hello"], ["a", "b"]]}), "xl/sharedStrings.xml", "This Excel file declares"),
        (docgen.make_odt([("Title", ["Hello"])]), "content.xml", "This OpenDocument text file declares"),
    ],
    ids=["pptx", "docx", "xlsx", "odt"],
)
def test_external_entities_are_never_resolved(data, member, refusal):
    """python-pptx and python-docx parse with entities off (the text stays as written); openpyxl and
    odfpy parse with defusedxml, which refuses the declaration: the refusal says so."""
    hostile = _with_entity(data, member)
    if refusal is None:
        parsed = parse_document(data=hostile, filename="x")
        assert "Hello" in parsed.text and open("/etc/hostname").read().strip() not in parsed.text.split("Hello", 1)[1]
        return
    with pytest.raises(CorruptDocumentError, match=f"{refusal} XML entities, which are refused for safety"):
        parse_document(data=hostile, filename="x")
