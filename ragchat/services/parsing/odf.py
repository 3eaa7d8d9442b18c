"""OpenDocument (.odt, .ods, .odp; odfpy): LibreOffice's and Google Docs' export formats.

Text documents give headings (sections), paragraphs, lists and tables in order; spreadsheets each
sheet as a section of header-labelled rows (spreadsheet.py's reader and limits); presentations one
section per slide, the slide number as its page, with tables and speaker notes.

Before parsing: the archive's zip bomb checks (archive.py), and an encrypted document is refused
with a sentence. Repeats are expanded with care: ODF writes a million styled empty rows as one row
"repeated 1,048,000 times", and a run of spaces as one element with a count; neither is expanded
past what the limits allow. Macros (Basic scripts) are never read or run.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from typing import Any

from ragchat.services.errors import CorruptDocumentError, EncryptedDocumentError
from ragchat.services.parsing.archive import check_zip
from ragchat.services.parsing.base import MIME_TYPES, ParsedDocument, TextBlock
from ragchat.services.parsing.spreadsheet import ENTITIES_MESSAGE, MAX_COLUMNS, MAX_EMPTY_RUN, SheetReader
from ragchat.services.parsing.tables import table_blocks
from ragchat.services.parsing.textutil import clean_inline, clean_text, filename_title

TEXT_NS = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
TABLE_NS = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
DRAW_NS = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
PRESENTATION_NS = "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"
OFFICE_NS = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
MAX_SPACES = 100  # <text:s c="..."/>: a run of spaces, capped

_NAMES = {"odt": "OpenDocument text", "ods": "OpenDocument spreadsheet", "odp": "OpenDocument presentation"}


def parse(*, data: bytes, filename: str, max_unpacked_bytes: int, kind: str) -> ParsedDocument:
    what = _NAMES[kind]
    check_zip(data, max_unpacked_bytes=max_unpacked_bytes, what=f"{what} file")
    _refuse_encrypted(data, what)
    from defusedxml import DefusedXmlException  # odfpy reads with defusedxml's SAX parser
    from odf.opendocument import load

    try:
        document = load(io.BytesIO(data))
    except DefusedXmlException as e:  # a ValueError: before the general case
        raise CorruptDocumentError(ENTITIES_MESSAGE.format(what=f"{what} file")) from e
    except (zipfile.BadZipFile, KeyError, ValueError, TypeError, AttributeError, OSError, SyntaxError) as e:
        raise CorruptDocumentError(
            f"This {what} file is damaged and cannot be read; re-save it and upload it again."
        ) from e
    warnings: list[str] = []
    pages = None
    if kind == "odt":
        blocks = list(_text_blocks(document.text))
    elif kind == "odp":
        blocks, pages = _presentation_blocks(document.presentation)
    else:
        reader = SheetReader(max_text=max_unpacked_bytes)
        for sheet in _children(document.spreadsheet, TABLE_NS, "table"):
            name = clean_inline(sheet.getAttrNS(TABLE_NS, "name") or "") or "Sheet"
            reader.sheet(name, _sheet_rows(sheet))
        blocks, warnings = reader.blocks, reader.warnings
    meta_title = _meta_title(document)
    first_heading = next((b.text for b in blocks if b.is_heading and not b.text.startswith("Slide ")), "")
    return ParsedDocument(
        mime_type=MIME_TYPES[kind],
        kind=kind,
        title=meta_title or first_heading or filename_title(filename),
        pages=pages,
        blocks=blocks,
        warnings=warnings,
    )


def parse_odt(*, data: bytes, filename: str, max_unpacked_bytes: int) -> ParsedDocument:
    return parse(data=data, filename=filename, max_unpacked_bytes=max_unpacked_bytes, kind="odt")


def parse_ods(*, data: bytes, filename: str, max_unpacked_bytes: int) -> ParsedDocument:
    return parse(data=data, filename=filename, max_unpacked_bytes=max_unpacked_bytes, kind="ods")


def parse_odp(*, data: bytes, filename: str, max_unpacked_bytes: int) -> ParsedDocument:
    return parse(data=data, filename=filename, max_unpacked_bytes=max_unpacked_bytes, kind="odp")


def _refuse_encrypted(data: bytes, what: str) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            manifest = archive.read("META-INF/manifest.xml") if "META-INF/manifest.xml" in archive.namelist() else b""
    except (zipfile.BadZipFile, OSError, RuntimeError) as e:
        raise CorruptDocumentError(f"This {what} file is damaged and cannot be opened.") from e
    if b"encryption-data" in manifest:
        raise EncryptedDocumentError(
            f"This {what} file is password-protected; save it without a password and upload it again."
        )


# ------------------------------------------------------------------------------------ walking


def _is(node: Any, namespace: str, name: str) -> bool:
    return getattr(node, "qname", None) == (namespace, name)


def _children(node: Any, namespace: str, name: str) -> Iterator[Any]:
    for child in getattr(node, "childNodes", []):
        if _is(child, namespace, name):
            yield child


def node_text(node: Any) -> str:
    """The text a reader sees in an element: spaces, tabs and line breaks as written (a run of
    spaces capped at MAX_SPACES), notes' and annotations' bodies left out."""
    parts: list[str] = []
    for child in getattr(node, "childNodes", []):
        if child.nodeType == child.TEXT_NODE:
            parts.append(child.data)
            continue
        qname = getattr(child, "qname", None)
        if qname == (TEXT_NS, "s"):
            count = child.getAttrNS(TEXT_NS, "c")
            parts.append(" " * min(int(count) if (count or "").isdigit() else 1, MAX_SPACES))
        elif qname == (TEXT_NS, "tab"):
            parts.append("\t")
        elif qname == (TEXT_NS, "line-break"):
            parts.append("\n")
        elif qname in {(TEXT_NS, "note"), (OFFICE_NS, "annotation")}:
            continue
        else:
            parts.append(node_text(child))
    return "".join(parts)


def _text_blocks(root: Any, section: str | None = None, page: int | None = None) -> Iterator[TextBlock]:
    """Headings start sections; paragraphs, list items and tables in document order."""
    current = section
    for child in getattr(root, "childNodes", []):
        qname = getattr(child, "qname", None)
        if qname == (TEXT_NS, "h"):
            text = clean_inline(node_text(child))
            if text:
                current = text
                yield TextBlock(text=text, section=current, page_number=page, is_heading=True)
        elif qname == (TEXT_NS, "p"):
            text = clean_text(node_text(child))
            if text:
                yield TextBlock(text=text, section=current, page_number=page)
        elif qname == (TABLE_NS, "table"):
            rows = [[clean_inline(node_text(cell)) for cell in _row_cells(row)] for row in _table_rows(child)]
            yield from table_blocks(rows, section=current, page_number=page)
        elif qname is not None:  # lists, sections, frames: their paragraphs, in order
            for block in _text_blocks(child, current, page):
                if block.is_heading:
                    current = block.section
                yield block


def _table_rows(table: Any) -> Iterator[Any]:
    for child in getattr(table, "childNodes", []):
        if _is(child, TABLE_NS, "table-row"):
            yield child
        elif getattr(child, "qname", (None, ""))[1] in {"table-header-rows", "table-rows", "table-row-group"}:
            yield from _table_rows(child)


def _row_cells(row: Any) -> list[Any]:
    cells: list[Any] = []
    for cell in getattr(row, "childNodes", []):
        if getattr(cell, "qname", (None, ""))[1] in {"table-cell", "covered-table-cell"}:
            cells.append(cell)
    return cells


def _repeat(node: Any, attribute: str) -> int:
    value = node.getAttrNS(TABLE_NS, attribute)
    return int(value) if (value or "").isdigit() and int(value) > 0 else 1


def _sheet_rows(sheet: Any) -> Iterator[list[str]]:
    """A sheet's rows as cell texts (what the cell shows, so formulas give their saved result).
    Repeated rows and cells are expanded only while they hold something, and never past the
    limits: an empty row repeated a million times counts as MAX_EMPTY_RUN empty rows."""
    for row in _table_rows(sheet):
        cells: list[str] = []
        for cell in _row_cells(row):
            text = clean_inline(node_text(cell))
            cells.extend([text] * min(_repeat(cell, "number-columns-repeated"), MAX_COLUMNS - len(cells)))
            if len(cells) >= MAX_COLUMNS:
                break
        while cells and not cells[-1]:
            cells.pop()
        repeat = _repeat(row, "number-rows-repeated")
        if not cells:
            repeat = min(repeat, MAX_EMPTY_RUN)
        for _ in range(repeat):
            yield cells


def _presentation_blocks(root: Any) -> tuple[list[TextBlock], int]:
    blocks: list[TextBlock] = []
    number = 0
    for number, page in enumerate(_children(root, DRAW_NS, "page"), start=1):
        title = ""
        body: list[TextBlock] = []
        notes = ""
        for frame in getattr(page, "childNodes", []):
            qname = getattr(frame, "qname", None)
            if qname == (PRESENTATION_NS, "notes"):
                notes = clean_text(node_text(frame))
                continue
            if qname is None:
                continue
            if not title and frame.getAttrNS(PRESENTATION_NS, "class") == "title":
                title = clean_inline(node_text(frame))
                continue
            body.extend(_text_blocks(frame, None, number))
        section = title or f"Slide {number}"
        blocks.append(TextBlock(text=section, section=section, page_number=number, is_heading=True))
        for block in body:
            blocks.append(TextBlock(text=block.text, section=section, page_number=number, is_row=block.is_row))
        if notes:
            blocks.append(TextBlock(text=f"Speaker notes: {notes}", section=section, page_number=number))
    return blocks, number


def _meta_title(document: Any) -> str:
    try:
        from odf.dc import Title

        titles = document.meta.getElementsByType(Title)
    except (AttributeError, KeyError):
        return ""
    return clean_inline(node_text(titles[0])) if titles else ""
