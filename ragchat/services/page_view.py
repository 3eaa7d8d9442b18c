"""A PDF page as the viewer shows it: the page rendered to a PNG, and where a cited passage sits on it.

The passage is found among the page's words: from the PDF's text layer (PDFium's character boxes)
or, on a scanned page, from Tesseract's word boxes. The chunk's words are aligned with the page's
(difflib), so hyphenation, the heading a chunk opens with, or a few misread words do not lose it;
runs of at least MIN_RUN words count, which keeps a stray "the" elsewhere on the page unmarked. The
matched words are merged into one box per line. Boxes are fractions of the page (0-1, from the top
left), so they fit the image at any size.

PDFium is not thread-safe: every use holds the lock that text recognition holds (parsing.ocr).
"""

from __future__ import annotations

import difflib
import io
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ragchat.services.parsing.ocr import OCR_LANGUAGE, OCR_PAGE_TIMEOUT, _render_lock

PAGE_WIDTH_PX = 1100  # wide enough to read on a desktop, sharp on a phone's 3x screen at 390 px
OCR_BOX_DPI = 200  # word boxes of a scan: enough for Tesseract, a third of the time of 300 dpi
MIN_RUN = 3
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Box:
    """A rectangle on the page as fractions of its width and height, from the top left."""

    left: float
    top: float
    right: float
    bottom: float

    def as_list(self) -> list[float]:
        return [round(self.left, 4), round(self.top, 4), round(self.right, 4), round(self.bottom, 4)]


@dataclass(frozen=True)
class Word:
    text: str
    box: Box


class PageNotFound(ValueError):
    """The PDF has no such page, or cannot be opened."""


def _open(data: bytes):
    import pypdfium2 as pdfium

    try:
        return pdfium.PdfDocument(data)
    except Exception as e:  # PdfiumError and friends: a damaged or encrypted file
        raise PageNotFound(f"the PDF could not be opened ({e})") from e


def pdf_page_count(data: bytes) -> int:
    with _render_lock:
        pdf = _open(data)
        try:
            return len(pdf)
        finally:
            pdf.close()


@contextmanager
def _pdf_page(data: bytes, page_number: int) -> Iterator[Any]:
    """The page (1-based) of the PDF, open while the block runs; one render at a time."""
    with _render_lock:
        pdf = _open(data)
        try:
            if not 1 <= page_number <= len(pdf):
                raise PageNotFound(f"the document has no page {page_number}")
            page = pdf[page_number - 1]
            try:
                yield page
            finally:
                page.close()
        finally:
            pdf.close()


def render_pdf_page(data: bytes, page_number: int, *, width_px: int = PAGE_WIDTH_PX) -> tuple[bytes, int, int]:
    """The page (1-based) as a PNG `width_px` wide: (bytes, width, height)."""
    with _pdf_page(data, page_number) as page:
        width, _height = page.get_size()
        image = page.render(scale=width_px / max(width, 1.0)).to_pil()
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue(), image.width, image.height


def pdf_page_words(data: bytes, page_number: int) -> list[Word]:
    """The words of the page's text layer with their boxes (none on a scanned page)."""
    import pypdfium2.raw as raw

    with _pdf_page(data, page_number) as page:
        width, height = page.get_size()
        text_page = page.get_textpage()
        chars = []
        for i in range(text_page.count_chars()):
            left, bottom, right, top = text_page.get_charbox(i)
            chars.append((chr(raw.FPDFText_GetUnicode(text_page.raw, i)), left, bottom, right, top))
        text_page.close()
    words: list[Word] = []
    current: list[tuple[str, float, float, float, float]] = []

    def flush() -> None:
        if current:
            text = "".join(c[0] for c in current)
            left = min(c[1] for c in current)
            right = max(c[3] for c in current)
            top = max(c[4] for c in current)
            bottom = min(c[2] for c in current)
            box = Box(left / width, 1 - top / height, right / width, 1 - bottom / height)
            words.append(Word(text, box))
            current.clear()

    for char in chars:
        if char[0].isspace() or char[0] == "\x00" or (char[3] - char[1]) <= 0:
            flush()
        else:
            current.append(char)
    flush()
    return words


def ocr_page_words(data: bytes, page_number: int) -> list[Word]:
    """The words Tesseract reads on the rendered page, with their boxes (a scanned page)."""
    import pytesseract

    os.environ.setdefault("OMP_THREAD_LIMIT", "1")
    with _pdf_page(data, page_number) as page:
        image = page.render(scale=OCR_BOX_DPI / 72, grayscale=True).to_pil()
    found = pytesseract.image_to_data(
        image, lang=OCR_LANGUAGE, timeout=OCR_PAGE_TIMEOUT, output_type=pytesseract.Output.DICT
    )
    width, height = image.width, image.height
    words = []
    for text, left, top, w, h in zip(found["text"], found["left"], found["top"], found["width"], found["height"]):
        if text and text.strip():
            words.append(Word(text, Box(left / width, top / height, (left + w) / width, (top + h) / height)))
    return words


def _norm(text: str) -> str:
    return "".join(_WORD.findall(text.lower()))


def passage_boxes(words: list[Word], passage: str) -> list[Box]:
    """Where `passage` is among the page's `words`: one box per line of the words that match it."""
    page = [(i, _norm(w.text)) for i, w in enumerate(words)]
    page = [(i, t) for i, t in page if t]
    wanted = [t for t in (_norm(w) for w in passage.split()) if t]
    if not page or not wanted:
        return []
    matcher = difflib.SequenceMatcher(None, [t for _, t in page], wanted, autojunk=False)
    run = min(MIN_RUN, len(wanted))
    hit = sorted(page[b.a + k][0] for b in matcher.get_matching_blocks() if b.size >= run for k in range(b.size))
    boxes: list[Box] = []
    for i in hit:
        box = words[i].box
        last = boxes[-1] if boxes else None
        same_line = (
            last is not None
            and box.left >= last.left
            and min(box.bottom, last.bottom) - max(box.top, last.top) > 0.5 * (box.bottom - box.top)
        )
        if same_line and last is not None:
            boxes[-1] = Box(last.left, min(last.top, box.top), max(last.right, box.right), max(last.bottom, box.bottom))
        else:
            boxes.append(box)
    return boxes
