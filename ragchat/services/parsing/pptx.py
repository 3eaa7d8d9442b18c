"""PowerPoint (.pptx, also .pptm): one section per slide, the slide number as its page (python-pptx).

A slide gives its title, the text of its shapes in reading order (top to bottom, then left to
right; grouped shapes included), its tables (tables.py) and its speaker notes. Macros, embedded
objects and linked files are never run, opened or fetched: only the slides' XML is read.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from typing import Any

from ragchat.services.errors import CorruptDocumentError
from ragchat.services.parsing.archive import check_zip
from ragchat.services.parsing.base import MIME_TYPES, ParsedDocument, TextBlock
from ragchat.services.parsing.tables import table_blocks
from ragchat.services.parsing.textutil import clean_inline, clean_text, filename_title

_DAMAGED = (
    "This PowerPoint file is damaged and cannot be read; open and re-save it in PowerPoint, then upload it again."
)


def parse(*, data: bytes, filename: str, max_unpacked_bytes: int) -> ParsedDocument:
    check_zip(data, max_unpacked_bytes=max_unpacked_bytes, what="PowerPoint file")
    from lxml.etree import XMLSyntaxError
    from pptx import Presentation
    from pptx.exc import PackageNotFoundError

    try:
        presentation = Presentation(io.BytesIO(data))
        blocks: list[TextBlock] = []
        slide_count = 0
        for number, slide in enumerate(presentation.slides, start=1):
            slide_count = number
            blocks.extend(_slide_blocks(slide, number))
        core_title = clean_inline(presentation.core_properties.title or "")
    except (PackageNotFoundError, XMLSyntaxError, zipfile.BadZipFile, KeyError, ValueError, OSError) as e:
        raise CorruptDocumentError(_DAMAGED) from e
    first_title = next((b.text for b in blocks if b.is_heading and not b.text.startswith("Slide ")), "")
    return ParsedDocument(
        mime_type=MIME_TYPES["pptx"],
        kind="pptx",
        title=core_title or first_title or filename_title(filename),
        pages=slide_count,
        blocks=blocks,
        warnings=[],
    )


def _slide_blocks(slide: Any, number: int) -> list[TextBlock]:
    title_shape = slide.shapes.title
    title = clean_inline(title_shape.text_frame.text) if title_shape is not None and title_shape.has_text_frame else ""
    # The heading opens the slide's own chunk (the chunker starts a chunk at every heading).
    section = title or f"Slide {number}"
    blocks = [TextBlock(text=section, page_number=number, section=section, is_heading=True)]
    title_id = title_shape.shape_id if title_shape is not None else None
    for shape in _reading_order(slide.shapes):
        if shape.shape_id == title_id and not _is_group(shape):
            continue
        if getattr(shape, "has_table", False) and shape.has_table:
            table = shape.table
            rows = [[cell.text for cell in row.cells] for row in table.rows]
            blocks.extend(
                table_blocks(rows, section=section, page_number=number, has_header=True if table.first_row else None)
            )
        elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
            blocks.extend(_frame_blocks(shape.text_frame, section, number))
    if slide.has_notes_slide:
        notes_frame = slide.notes_slide.notes_text_frame
        notes = clean_text(notes_frame.text) if notes_frame is not None else ""
        if notes:
            blocks.append(TextBlock(text=f"Speaker notes: {notes}", page_number=number, section=section))
    return blocks


def _frame_blocks(frame: Any, section: str, number: int) -> Iterator[TextBlock]:
    for paragraph in frame.paragraphs:
        text = clean_inline("".join(run.text for run in paragraph.runs) or "")
        if text:
            yield TextBlock(text=text, page_number=number, section=section)


def _is_group(shape: Any) -> bool:
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    return shape.shape_type == MSO_SHAPE_TYPE.GROUP


def _reading_order(shapes: Any) -> Iterator[Any]:
    """Top to bottom, then left to right; a group's shapes in their own order at the group's place."""
    ordered = sorted(shapes, key=lambda shape: (shape.top or 0, shape.left or 0))
    for shape in ordered:
        if _is_group(shape):
            yield from _reading_order(shape.shapes)
        else:
            yield shape
