"""PDF: one block per page, with the page number and the section from the PDF's outline (pypdf).

Pages without a text layer (scans) are read by text recognition (`ocr.py`: PDFium renders, Tesseract
reads); a mixed PDF keeps both, each page under its own number, and `ParsedDocument.ocr_pages` says
which pages were recognised rather than read.
"""

from __future__ import annotations

import io
import logging
import re
import warnings as py_warnings
import zlib
from collections.abc import Iterator
from typing import Any

from ragchat.services.errors import (
    CorruptDocumentError,
    DocumentTooLargeError,
    EmptyDocumentError,
    EncryptedDocumentError,
)
from ragchat.services.parsing import ocr
from ragchat.services.parsing.base import MIME_TYPES, ParsedDocument, TextBlock
from ragchat.services.parsing.textutil import clean_inline, clean_text, filename_title, first_line_title, page_list

logger = logging.getLogger(__name__)


def parse(*, data: bytes, filename: str, max_unpacked_bytes: int) -> ParsedDocument:
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError, LimitReachedError, PyPdfError

    warnings: list[str] = []
    try:
        with py_warnings.catch_warnings():
            py_warnings.simplefilter("ignore")
            reader = PdfReader(io.BytesIO(data), strict=False)
            if reader.is_encrypted:
                _unlock_pdf(reader, warnings)
            page_count = len(reader.pages)
            sections = _pdf_sections(reader, page_count)
            blocks: list[TextBlock] = []
            empty_pages: list[int] = []
            unpacked = 0
            for index, page in enumerate(reader.pages):
                text = clean_text(_extract_page_text(page, index, warnings))
                unpacked += len(text)
                if unpacked > max_unpacked_bytes:
                    raise DocumentTooLargeError(
                        "This PDF holds more text than the limit allows; split it into smaller files."
                    )
                if not text.strip():
                    empty_pages.append(index + 1)
                    continue
                blocks.append(TextBlock(text=text, page_number=index + 1, section=sections[index]))
            metadata_title = _pdf_metadata_title(reader)
    except (EncryptedDocumentError, DocumentTooLargeError):
        raise
    except FileNotDecryptedError as e:
        raise EncryptedDocumentError(_ENCRYPTED_PDF) from e
    except LimitReachedError as e:
        raise DocumentTooLargeError(
            "This PDF unpacks to more data than the limit allows; it may be malformed or a decompression bomb."
        ) from e
    except (
        PyPdfError,
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        IndexError,
        RecursionError,
        OSError,
        zlib.error,
    ) as e:
        raise CorruptDocumentError(
            "This PDF is damaged or incomplete and cannot be read; re-export or re-download it and upload it again."
        ) from e
    ocr_pages: list[int] = []
    if empty_pages:
        ocr_blocks, ocr_pages = _recognise(data, empty_pages, sections, warnings)
        blocks = sorted([*blocks, *ocr_blocks], key=lambda block: block.page_number or 0)
    if not blocks:
        raise EmptyDocumentError(
            "No text could be read from this PDF, not even by text recognition (OCR): "
            "its pages are blank or the scan is unreadable."
        )
    title = metadata_title or first_line_title(blocks[0].text) or filename_title(filename)
    return ParsedDocument(
        mime_type=MIME_TYPES["pdf"],
        kind="pdf",
        title=title,
        pages=page_count,
        blocks=blocks,
        warnings=warnings,
        ocr_pages=ocr_pages,
    )


def _recognise(
    data: bytes, pages: list[int], sections: list[str | None], warnings: list[str]
) -> tuple[list[TextBlock], list[int]]:
    """OCR the pages without a text layer; what cannot be read is named in a warning."""
    unavailable = ocr.ocr_unavailable_reason()
    if unavailable:
        warnings.append(f"No text layer on page(s) {page_list(pages)}, and {unavailable}; they were not read.")
        return [], []
    outcome = ocr.ocr_pdf_pages(data, pages)
    blocks: list[TextBlock] = []
    read: list[int] = []
    blank: list[int] = []
    for number in pages:
        text = clean_text(outcome.texts.get(number, ""))
        if text.strip():
            blocks.append(TextBlock(text=text, page_number=number, section=sections[number - 1]))
            read.append(number)
        elif number in outcome.texts:
            blank.append(number)
    if read:
        warnings.append(f"Page(s) {page_list(read)} had no text layer and were read by text recognition (OCR).")
    if blank:
        warnings.append(f"No text found on page(s) {page_list(blank)}, not even by text recognition (OCR).")
    for number, reason in sorted(outcome.failed.items()):
        warnings.append(f"Page {number} could not be read by text recognition: {reason}.")
    if outcome.skipped:
        warnings.append(
            f"Page(s) {page_list(outcome.skipped)} were not read: text recognition stops after "
            f"{ocr.OCR_MAX_PAGES} pages."
        )
    return blocks, read


_ENCRYPTED_PDF = "This PDF is password-protected; remove the password and upload it again."


def _unlock_pdf(reader: Any, warnings: list[str]) -> None:
    """Open PDFs that only carry an owner password (print/copy restrictions); refuse real passwords."""
    from pypdf import PasswordType

    try:
        result = reader.decrypt("")
    except Exception as e:  # pypdf raises several types for unsupported crypto
        raise EncryptedDocumentError(_ENCRYPTED_PDF) from e
    if result == PasswordType.NOT_DECRYPTED:
        raise EncryptedDocumentError(_ENCRYPTED_PDF)
    warnings.append("This PDF carries usage restrictions; its text was read anyway.")


def _extract_page_text(page: Any, index: int, warnings: list[str]) -> str:
    try:
        return page.extract_text() or ""
    except Exception as e:  # one broken page should not lose the others
        logger.info("pdf page %s: text extraction failed: %s", index + 1, e)
        warnings.append(f"Page {index + 1} could not be read and was skipped.")
        return ""


def _pdf_sections(reader: Any, page_count: int) -> list[str | None]:
    """Section title per page from the PDF's outline (bookmarks): the last entry starting at or before it."""
    starts: list[tuple[int, str]] = []
    try:
        for item in _flatten_outline(reader.outline):
            number = reader.get_destination_page_number(item)
            title = clean_inline(str(getattr(item, "title", "") or ""))
            if number is not None and number >= 0 and title:
                starts.append((number, title))
    except Exception as e:  # outlines are a nicety; a broken one must not fail the upload
        logger.info("pdf outline unreadable: %s", e)
        return [None] * page_count
    starts.sort(key=lambda pair: pair[0])
    sections: list[str | None] = []
    current: str | None = None
    position = 0
    for page in range(page_count):
        while position < len(starts) and starts[position][0] <= page:
            current = starts[position][1]
            position += 1
        sections.append(current)
    return sections


def _flatten_outline(outline: Any) -> Iterator[Any]:
    for item in outline or []:
        if isinstance(item, list):
            yield from _flatten_outline(item)
        else:
            yield item


def _pdf_metadata_title(reader: Any) -> str:
    try:
        title = reader.metadata.title if reader.metadata else None
    except Exception:
        return ""
    if not title:
        return ""
    # Office exporters write "Microsoft Word - minutes.docx"; the file's own name is the useful part.
    title = re.sub(r"^Microsoft (Word|PowerPoint|Excel) - ", "", clean_inline(str(title)))
    return re.sub(r"\.(docx?|pptx?|xlsx?|odt|rtf)$", "", title, flags=re.IGNORECASE)
