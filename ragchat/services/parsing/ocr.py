"""Text recognition for PDF pages without a text layer (scans): PDFium renders the page
(pypdfium2), Debian's Tesseract reads it (pytesseract drives the `tesseract` program; the Makefile's
install step installs tesseract-ocr and its English data).

PDFium is not thread-safe, so rendering holds a lock; Tesseract runs as its own process, limited to
one thread (two ingestions share two cores).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import threading
from dataclasses import dataclass

logger = logging.getLogger(__name__)

OCR_DPI = 300
OCR_LANGUAGE = "eng"
OCR_MAX_PAGES = 300  # a longer scan is read up to here; the rest is named in a warning
OCR_PAGE_TIMEOUT = 120  # seconds for one page

_render_lock = threading.Lock()


@dataclass(frozen=True)
class OcrOutcome:
    texts: dict[int, str]  # page number (1-based) -> recognised text (may be empty)
    failed: dict[int, str]  # page number -> why it could not be read
    skipped: list[int]  # over OCR_MAX_PAGES


@functools.cache
def ocr_unavailable_reason() -> str | None:
    """None when Tesseract with the language data can run here; else the reason, for a warning."""
    if shutil.which("tesseract") is None:
        return "text recognition (OCR) is not installed on this server (Debian package tesseract-ocr)"
    try:
        import pytesseract

        languages = pytesseract.get_languages(config="")
    except Exception as e:  # a broken installation: say so rather than fail the upload
        return f"text recognition (OCR) could not start ({e})"
    if OCR_LANGUAGE not in languages:
        return f"the OCR language data '{OCR_LANGUAGE}' is missing (Debian package tesseract-ocr-{OCR_LANGUAGE})"
    return None


def ocr_pdf_pages(data: bytes, page_numbers: list[int]) -> OcrOutcome:
    """Render each listed page of the PDF and recognise its text."""
    import pypdfium2 as pdfium
    import pytesseract

    os.environ.setdefault("OMP_THREAD_LIMIT", "1")
    wanted, skipped = page_numbers[:OCR_MAX_PAGES], page_numbers[OCR_MAX_PAGES:]
    texts: dict[int, str] = {}
    failed: dict[int, str] = {}
    try:
        with _render_lock:
            pdf = pdfium.PdfDocument(data)
    except Exception as e:  # PDFium cannot open what pypdf could: every page fails with the reason
        return OcrOutcome({}, dict.fromkeys(wanted, f"the page could not be rendered ({e})"), skipped)
    try:
        for number in wanted:
            try:
                with _render_lock:
                    page = pdf[number - 1]
                    image = page.render(scale=OCR_DPI / 72, grayscale=True).to_pil()
                    page.close()
            except Exception as e:
                logger.info("pdf page %s: rendering for OCR failed: %s", number, e)
                failed[number] = f"the page could not be rendered ({e})"
                continue
            try:
                texts[number] = pytesseract.image_to_string(image, lang=OCR_LANGUAGE, timeout=OCR_PAGE_TIMEOUT)
            except Exception as e:  # RuntimeError on timeout, TesseractError on a bad image
                logger.info("pdf page %s: OCR failed: %s", number, e)
                failed[number] = f"text recognition failed ({e})"
    finally:
        with _render_lock:
            pdf.close()
    return OcrOutcome(texts, failed, skipped)
