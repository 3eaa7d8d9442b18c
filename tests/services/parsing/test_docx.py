"""Word documents: heading sections and tables; zip bombs and damaged files refused."""

from __future__ import annotations

import io
import zipfile

import pytest

from ragchat.evaluation import docgen
from ragchat.services.errors import (
    CorruptDocumentError,
    DocumentTooLargeError,
)
from ragchat.services.parsing import parse_document


def test_docx_headings_become_sections_and_tables_are_included():
    data = docgen.make_docx(
        [
            ("Laptops", ["Every employee gets a laptop.", "Replacements every four years."]),
            ("Phones", ["Phones on request."]),
        ],
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
    assert by_text["Model: ThinkPad T14 | Price: 1450 EUR"] == "Laptops"  # the row carries its header
    headings = [b.text for b in parsed.blocks if b.is_heading]
    assert headings == ["IT Handbook", "Laptops", "Phones"]


def test_docx_subheadings_are_sections_too():
    data = docgen.make_docx([("Scope", ["Applies to all staff."])], heading_level=3)
    parsed = parse_document(data=data, filename="x.docx")
    assert [(b.text, b.section) for b in parsed.blocks] == [("Scope", "Scope"), ("Applies to all staff.", "Scope")]


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
