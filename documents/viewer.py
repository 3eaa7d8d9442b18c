"""What the document viewer shows: the stored chunks of a document as a reading text, a PDF page as
an image (cached on disk) and where the cited passage sits on it.

The text comes from the chunks as indexed (the embedded store or Qdrant): what the model was given
is what the reader checks. Consecutive chunks of one section overlap (chunking's A6 rule); the
overlap is shown once. Access is decided before any of this is called (documents.selectors).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from asgiref.sync import async_to_sync
from django.conf import settings
from django.utils.html import linebreaks
from django.utils.safestring import SafeString, mark_safe

from documents.models import Document
from ragchat.markup import markdown_to_html
from ragchat.services import page_view
from ragchat.services.types import SearchResult, make_source_id

logger = logging.getLogger(__name__)

CACHE_DIR = "viewer-cache"
# The reading view of a long document: this many chunks either side of the cited one.
WINDOW = 40
_BLOCK_OPEN = re.compile(r"<(p|li|h[1-6]|td|th|blockquote)(\s[^>]*)?>")
_BLOCK_CLOSE = re.compile(r"</(p|li|h[1-6]|td|th|blockquote)>")


class ChunksUnavailable(RuntimeError):
    """The store cannot be read from this process (a client of the embedded store) or is down."""


@dataclass
class ShownChunk:
    """One chunk as the viewer shows it: its own text without the overlap it repeats, as HTML."""

    chunk: SearchResult
    html: SafeString
    heading: str = ""  # the section's name, when this chunk starts a section its text does not name
    cited: bool = False
    source_id: str = ""


@dataclass
class Reading:
    chunks: list[ShownChunk] = field(default_factory=list)
    earlier: int = 0  # chunks before the window, not shown
    later: int = 0


def document_chunks(*, document: Document) -> list[SearchResult]:
    """The document's chunks as they were indexed, in order."""
    from ragchat import runtime
    from ragchat.processes import StoreNotInThisProcess

    async def read() -> list[SearchResult]:
        service = await runtime.ready_vector_service()
        return await service.document_chunks(
            document.document_id, tenant_id=document.tenant_id, count=document.chunk_count
        )

    if not document.chunk_count:
        return []
    try:
        return async_to_sync(read)()
    except StoreNotInThisProcess as e:
        raise ChunksUnavailable("The indexed text is read by the server that holds the index.") from e
    except Exception as e:  # the Qdrant server down: the page still shows the document's facts
        logger.warning("viewer: chunks of %s could not be read: %s", document.pk, e)
        raise ChunksUnavailable("The index could not be read just now; try again in a moment.") from e


def is_markdown(document: Document) -> bool:
    return document.kind == "markdown"


def _overlap(previous: str, text: str) -> int:
    """How many leading characters of `text` repeat the end of `previous` (the chunker's overlap)."""
    probe = text[:40]
    if len(probe) < 8:
        return 0
    at = previous.rfind(probe)
    while at != -1:
        tail = previous[at:]
        if text.startswith(tail):
            return len(tail)
        at = previous.rfind(probe, 0, at)
    return 0


def _after_heading(text: str, section: str) -> str | None:
    """The text after the line naming the section, when one of its first lines does (a section's
    first chunk opens with its heading, the document's first after the title); else None."""
    lines = text.lstrip().split("\n")
    for i, line in enumerate(lines[:3]):
        if line.lstrip("#").strip().strip("*").strip().lower() == section.strip().lower():
            return "\n".join(lines[i + 1 :])
    return None


def _mark_blocks(html: str) -> str:
    """The cited chunk's rendered blocks with their content in <mark> (a mark may not hold a block)."""
    html = _BLOCK_OPEN.sub(lambda m: m.group(0) + "<mark>", html)
    return _BLOCK_CLOSE.sub(lambda m: "</mark>" + m.group(0), html)


def _text_html(text: str, *, markdown: bool, cited: bool) -> SafeString:
    if markdown:
        html = markdown_to_html(text)
    else:
        html = linebreaks(text.strip(), autoescape=True)  # paragraphs and line breaks, escaped
    return mark_safe(_mark_blocks(html) if cited else html)  # noqa: S308 — escaped or sanitised above


def reading(*, document: Document, chunks: list[SearchResult], cited: int | None, window: int = WINDOW) -> Reading:
    """The chunks around the cited one (all of a short document) as reading text, overlaps once."""
    if cited is not None and any(c.chunk_index == cited for c in chunks):
        at = next(i for i, c in enumerate(chunks) if c.chunk_index == cited)
    else:
        at = 0
    start, end = max(0, at - window), min(len(chunks), at + window + 1)
    markdown = is_markdown(document)
    out: list[ShownChunk] = []
    previous: SearchResult | None = chunks[start - 1] if start else None
    for chunk in chunks[start:end]:
        text = chunk.chunk_text
        same_section = previous is not None and (previous.section or "") == (chunk.section or "")
        if same_section and previous is not None:
            text = text[_overlap(previous.chunk_text, text) :]
        section = chunk.section or ""
        heading = "" if same_section else section
        after = _after_heading(text, section) if heading else None
        if after is not None:
            text = after  # the heading is shown once, as the heading
        is_cited = chunk.chunk_index == cited
        out.append(
            ShownChunk(
                chunk=chunk,
                html=_text_html(text, markdown=markdown, cited=is_cited),
                heading=heading,
                cited=is_cited,
                source_id=make_source_id(chunk.document_id, chunk.chunk_index),
            )
        )
        previous = chunk
    return Reading(chunks=out, earlier=start, later=len(chunks) - end)


# ----------------------------------------------------------------------------------- PDF pages


def _cache_root(document: Document) -> Path:
    return Path(settings.MEDIA_ROOT) / CACHE_DIR / document.tenant_id / str(document.pk)


def _cache_dir(document: Document) -> Path:
    return _cache_root(document) / f"v{document.version}"


def document_cache_clear(*, document: Document) -> None:
    """Forget the document's page images and word boxes (deleted, or a new version uploaded)."""
    shutil.rmtree(_cache_root(document), ignore_errors=True)


def document_original(document: Document) -> bytes:
    try:
        with document.file.open("rb") as handle:
            return handle.read()
    except (FileNotFoundError, ValueError) as e:
        raise page_view.PageNotFound("the original file is missing") from e


def document_page_png(*, document: Document, page: int) -> bytes:
    """The page rendered (cached per version of the document: a new version gets new images)."""
    path = _cache_dir(document) / f"page-{page}.png"
    if path.exists():
        return path.read_bytes()
    png, _width, _height = page_view.render_pdf_page(document_original(document), page)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".part")
    partial.write_bytes(png)
    partial.replace(path)
    return png


def document_page_words(*, document: Document, page: int) -> list[page_view.Word]:
    """The page's words with their boxes: the text layer, or Tesseract's on a page read by OCR
    (seconds of work, so cached like the image)."""
    path = _cache_dir(document) / f"words-{page}.json"
    if path.exists():
        rows = json.loads(path.read_text())
    else:
        data = document_original(document)
        scanned = page in (document.ocr_pages or [])
        words = page_view.pdf_page_words(data, page) if not scanned else []
        if scanned or not words:
            from ragchat.services.parsing.ocr import ocr_unavailable_reason

            if ocr_unavailable_reason() is None:
                words = page_view.ocr_page_words(data, page)
        rows = [[w.text, *w.box.as_list()] for w in words]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rows))
    return [page_view.Word(text, page_view.Box(*box)) for text, *box in rows]


def passage_boxes(*, document: Document, page: int, passage: str) -> list[list[float]]:
    """Where the passage is on the page, as [left, top, right, bottom] fractions; [] when not found."""
    try:
        words = document_page_words(document=document, page=page)
    except page_view.PageNotFound:
        return []
    except Exception as e:  # Tesseract failing must not cost the reader the page
        logger.warning("viewer: words of %s page %s: %s", document.pk, page, e)
        return []
    return [box.as_list() for box in page_view.passage_boxes(words, passage)]


def page_size(*, document: Document, page: int) -> tuple[int, int]:
    """The rendered image's size (width, height) in pixels, for the <img>'s attributes."""
    png = document_page_png(document=document, page=page)
    width = int.from_bytes(png[16:20], "big")
    height = int.from_bytes(png[20:24], "big")
    return width, height
