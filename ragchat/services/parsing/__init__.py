"""Turn an uploaded file into text blocks that keep their page number and section heading.

One module per format (pdf, docx, pptx, spreadsheet, odf, rtf, eml, html, markdown, text), each
with the same `parse()` signature
(`base.Parser`); `detect.detect_kind()` picks the format from the bytes, never from the file name
(R-DOC-7), and `PARSERS` maps that kind to its parser. Every refusal is a `DocumentError` subclass
whose message is written for the person who uploaded the file. Parsing uses well-kept libraries
(pypdf, python-docx, python-pptx, openpyxl, odfpy, striprtf, the standard library's email and csv,
BeautifulSoup with lxml, markdown-it-py); nothing here executes or renders the document's content,
follows its links or runs its macros. Tables of every format become header-labelled rows (tables.py).

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

from ragchat.services.errors import DocumentTooLargeError, EmptyDocumentError
from ragchat.services.parsing import docx, eml, html, markdown, odf, pdf, pptx, rtf, spreadsheet, text
from ragchat.services.parsing.base import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_UNPACKED_BYTES,
    MIME_TYPES,
    Attachment,
    ParsedDocument,
    Parser,
    TextBlock,
)
from ragchat.services.parsing.detect import detect_kind
from ragchat.services.parsing.filenames import safe_filename
from ragchat.services.parsing.textutil import human_size

__all__ = [
    "Attachment",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_UNPACKED_BYTES",
    "MIME_TYPES",
    "PARSERS",
    "ParsedDocument",
    "TextBlock",
    "detect_kind",
    "parse_document",
    "safe_filename",
]

PARSERS: dict[str, Parser] = {
    "pdf": pdf.parse,
    "docx": docx.parse,
    "html": html.parse,
    "markdown": markdown.parse,
    "text": text.parse,
    "pptx": pptx.parse,
    "xlsx": spreadsheet.parse_xlsx,
    "csv": spreadsheet.parse_csv,
    "eml": eml.parse,
    "odt": odf.parse_odt,
    "ods": odf.parse_ods,
    "odp": odf.parse_odp,
    "rtf": rtf.parse,
}


def parse_document(
    *,
    data: bytes,
    filename: str,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_unpacked_bytes: int = DEFAULT_MAX_UNPACKED_BYTES,
) -> ParsedDocument:
    """Detect the type from the content and parse it; raise a DocumentError the user can read."""
    if len(data) > max_bytes:
        raise DocumentTooLargeError(f"This file is {human_size(len(data))}; the limit is {human_size(max_bytes)}.")
    if not data or not data.strip():
        raise EmptyDocumentError("This file is empty.")
    kind = detect_kind(data=data, filename=filename)
    parsed = PARSERS[kind](data=data, filename=filename, max_unpacked_bytes=max_unpacked_bytes)
    if not any(block.text.strip() for block in parsed.blocks):
        raise EmptyDocumentError("This file contains no readable text.")
    return parsed
