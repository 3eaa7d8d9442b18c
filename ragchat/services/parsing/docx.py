"""Word (.docx): paragraphs and tables in document order, sections from heading styles (python-docx).

The archive is checked for zip bombs from its declared sizes before anything is inflated.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from typing import Any

from ragchat.services.errors import CorruptDocumentError
from ragchat.services.parsing.archive import check_zip
from ragchat.services.parsing.base import MIME_TYPES, ParsedDocument, TextBlock
from ragchat.services.parsing.tables import table_blocks
from ragchat.services.parsing.textutil import clean_inline, filename_title


def parse(*, data: bytes, filename: str, max_unpacked_bytes: int) -> ParsedDocument:
    check_zip(data, max_unpacked_bytes=max_unpacked_bytes, what="Word document")
    import docx
    from docx.opc.exceptions import PackageNotFoundError
    from lxml.etree import XMLSyntaxError

    try:
        document = docx.Document(io.BytesIO(data))
        blocks = list(_docx_blocks(document))
        core_title = clean_inline(document.core_properties.title or "")
    except (PackageNotFoundError, XMLSyntaxError, zipfile.BadZipFile, KeyError, ValueError, OSError) as e:
        raise CorruptDocumentError(
            "This Word document is damaged and cannot be read; open and re-save it in Word, then upload it again."
        ) from e
    first_heading = next((b.text for b in blocks if b.is_heading), "")
    title = core_title or first_heading or filename_title(filename)
    return ParsedDocument(
        mime_type=MIME_TYPES["docx"], kind="docx", title=title, pages=None, blocks=blocks, warnings=[]
    )


def _docx_blocks(document: Any) -> Iterator[TextBlock]:
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    section: str | None = None
    for child in document.element.body.iterchildren():
        tag = child.tag.rsplit("}", 1)[-1]
        if tag == "p":
            paragraph = Paragraph(child, document)
            text = clean_inline(paragraph.text)
            if not text:
                continue
            if _docx_heading_level(paragraph) is not None:
                section = text
                yield TextBlock(text=text, section=section, is_heading=True)
            else:
                yield TextBlock(text=text, section=section)
        elif tag == "tbl":
            yield from _docx_table_blocks(Table(child, document), section)


def _docx_heading_level(paragraph: Any) -> int | None:
    """Heading by style ("Heading 2", "Title") or by an explicit outline level in the paragraph."""
    style_name = ""
    try:
        style_name = (paragraph.style.name or "") if paragraph.style is not None else ""
    except (KeyError, ValueError):
        style_name = ""
    match = re.match(r"(?i)heading\s*(\d+)", style_name)
    if match:
        return int(match.group(1))
    if style_name.lower() == "title":
        return 0
    outline = paragraph._p.xpath("./w:pPr/w:outlineLvl/@w:val")
    if outline and outline[0].isdigit() and int(outline[0]) < 9:
        return int(outline[0]) + 1
    return None


def _docx_table_blocks(table: Any, section: str | None) -> list[TextBlock]:
    rows = []
    for row in table.rows:
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            # merged cells come back once per grid column; keep one copy
            if id(cell._tc) in seen:
                continue
            seen.add(id(cell._tc))
            cells.append(clean_inline(cell.text))
        rows.append(cells)
    # Word marks a header row that repeats on every page; otherwise the first row is judged
    marked = bool(table.rows) and bool(table.rows[0]._tr.xpath("./w:trPr/w:tblHeader"))
    return table_blocks(rows, section=section, has_header=True if marked else None)
