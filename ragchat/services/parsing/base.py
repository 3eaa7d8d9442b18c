"""What every format parser returns, and the one signature each of them implements."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

DEFAULT_MAX_BYTES = 25 * 1024 * 1024
DEFAULT_MAX_UNPACKED_BYTES = 200 * 1024 * 1024

MIME_TYPES = {
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "html": "text/html",
    "markdown": "text/markdown",
    "text": "text/plain",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "csv": "text/csv",
    "eml": "message/rfc822",
    "odt": "application/vnd.oasis.opendocument.text",
    "ods": "application/vnd.oasis.opendocument.spreadsheet",
    "odp": "application/vnd.oasis.opendocument.presentation",
    "rtf": "application/rtf",
}


@dataclass(frozen=True)
class TextBlock:
    """A paragraph-sized piece of text; `is_heading` marks a section heading's own text, `is_row`
    one row of a table (tables.py), which the chunker keeps whole."""

    text: str
    page_number: int | None = None
    section: str | None = None
    is_heading: bool = False
    is_row: bool = False


@dataclass(frozen=True)
class Attachment:
    """A file carried inside a document (an email's attachment), ingested as a document of its own."""

    filename: str
    data: bytes


@dataclass(frozen=True)
class ParsedDocument:
    mime_type: str
    kind: str  # a key of MIME_TYPES
    title: str
    pages: int | None
    blocks: list[TextBlock] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Pages whose text came from text recognition (scanned pages of a PDF), 1-based.
    ocr_pages: list[int] = field(default_factory=list)
    attachments: list[Attachment] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n\n".join(block.text for block in self.blocks)


class Parser(Protocol):
    """One format: bytes already sniffed as this kind in, blocks with pages and sections out."""

    def __call__(self, *, data: bytes, filename: str, max_unpacked_bytes: int) -> ParsedDocument: ...
