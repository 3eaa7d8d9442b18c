"""Word (.docx): paragraphs and tables in document order, sections from heading styles (python-docx).

The archive is checked for zip bombs from its declared sizes before anything is inflated.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from typing import Any

from ragchat.services.errors import CorruptDocumentError, DocumentTooLargeError
from ragchat.services.parsing.base import MIME_TYPES, ParsedDocument, TextBlock
from ragchat.services.parsing.textutil import clean_inline, filename_title, human_size

# A DOCX member that inflates more than this many times, and to more than the floor below, is a
# zip bomb: real Word XML compresses roughly 5-20x, a bomb's padding 1000x.
MAX_COMPRESSION_RATIO = 100
RATIO_CHECK_FLOOR_BYTES = 5 * 1024 * 1024
MAX_ZIP_MEMBERS = 10_000


def parse(*, data: bytes, filename: str, max_unpacked_bytes: int) -> ParsedDocument:
    _check_zip_bomb(data, max_unpacked_bytes)
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


def _check_zip_bomb(data: bytes, max_unpacked_bytes: int) -> None:
    """Refuse from the declared sizes, before anything is inflated (zipfile stops at the declared size)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as e:
        raise CorruptDocumentError("This Word document is damaged and cannot be opened.") from e
    if len(members) > MAX_ZIP_MEMBERS:
        raise DocumentTooLargeError("This Word document holds too many internal parts to be read safely.")
    total = sum(member.file_size for member in members)
    if total > max_unpacked_bytes:
        raise DocumentTooLargeError(
            f"This Word document unpacks to {human_size(total)}, over the {human_size(max_unpacked_bytes)} limit."
        )
    for member in members:
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size > RATIO_CHECK_FLOOR_BYTES and ratio > MAX_COMPRESSION_RATIO:
            raise DocumentTooLargeError(
                "This Word document is compressed suspiciously hard (a possible zip bomb) and was not opened."
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
            text = _docx_table_text(Table(child, document))
            if text:
                yield TextBlock(text=text, section=section)


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


def _docx_table_text(table: Any) -> str:
    rows = []
    for row in table.rows:
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            # merged cells come back once per grid column; keep one copy
            if id(cell._tc) in seen:
                continue
            seen.add(id(cell._tc))
            text = clean_inline(cell.text)
            if text:
                cells.append(text)
        if cells:
            rows.append(" | ".join(cells))
    return "\n".join(rows)
