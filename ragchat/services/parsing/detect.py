"""Which parser a file needs, decided from its bytes, never from its name (R-DOC-7).

A PNG renamed `.pdf` is refused as a PNG; an old Office file, an Excel sheet or a plain ZIP each
get a refusal that says what the file is and what to upload instead.

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import PurePosixPath

from ragchat.services.errors import CorruptDocumentError, UnsupportedDocumentError

MARKDOWN_EXTENSIONS = {".md", ".markdown", ".mdown", ".mkd", ".mkdn"}
HTML_EXTENSIONS = {".html", ".htm", ".xhtml"}


def detect_kind(*, data: bytes, filename: str) -> str:
    """Return the parser kind for these bytes, or raise UnsupportedDocumentError."""
    extension = PurePosixPath(filename.lower()).suffix
    if _looks_like_pdf(data):
        return "pdf"
    if data.startswith(b"PK\x03\x04"):
        return _zip_kind(data)
    if data.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        raise UnsupportedDocumentError(
            "This is an old Microsoft Office file (.doc/.xls); save it as .docx or PDF and upload it again."
        )
    if _looks_binary(data):
        raise UnsupportedDocumentError(_binary_message(data, extension))
    if extension == ".pdf":
        raise UnsupportedDocumentError(
            "This file is named .pdf but its content is not a PDF; export it as a real PDF and upload it again."
        )
    if extension == ".docx":
        raise UnsupportedDocumentError("This file is named .docx but its content is not a Word document.")
    head = data[:4096]
    # Sniffing only needs the ASCII markup; a multi-byte character cut at 4096 must not matter.
    codec = "utf-16" if head.startswith((b"\xff\xfe", b"\xfe\xff")) else "utf-8"
    text_head = head.decode(codec, errors="ignore").lstrip("\ufeff \t\r\n").lower()
    if _looks_like_html(text_head, extension):
        return "html"
    if extension in MARKDOWN_EXTENSIONS:
        return "markdown"
    return "text"


def _looks_like_pdf(data: bytes) -> bool:
    """%PDF- at the start; readers also accept it after junk within 1 KB if the file ends like a PDF."""
    if data.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"%PDF-"):
        return True
    return 0 < data.find(b"%PDF-", 0, 1024) and b"%%EOF" in data[-2048:]


def _zip_kind(data: bytes) -> str:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, ValueError, OSError) as e:
        raise CorruptDocumentError(
            "This file looks like a Word document or ZIP archive but is damaged and cannot be opened."
        ) from e
    if "word/document.xml" in names:
        return "docx"
    if "xl/workbook.xml" in names or "ppt/presentation.xml" in names:
        raise UnsupportedDocumentError(
            "Excel and PowerPoint files are not supported; upload PDF, Word (.docx), HTML, Markdown or text."
        )
    raise UnsupportedDocumentError(
        "This is a ZIP archive, not a document; upload PDF, Word (.docx), HTML, Markdown or text files."
    )


def _looks_binary(data: bytes) -> bool:
    head = data[:8192]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 text has NULs but is text
        return False
    if b"\x00" in head:
        return True
    control = sum(1 for byte in head if byte < 32 and byte not in (9, 10, 12, 13, 27))
    return control > len(head) * 0.05


def _binary_message(data: bytes, extension: str) -> str:
    what = _identify(data)
    named = f" named {extension}" if extension in {".pdf", ".docx", ".txt", ".md", ".html"} else ""
    looks = f" (it looks like {what})" if what else ""
    return (
        f"This file{named} is not a supported document{looks}. Upload PDF, Word (.docx), HTML, Markdown or plain text."
    )


def _identify(data: bytes) -> str:
    """A short human name for a binary type, best effort."""
    import puremagic

    try:
        matches = puremagic.magic_string(data[:8192])
    except (puremagic.PureError, ValueError):
        return ""
    if not matches:
        return ""
    best = max(matches, key=lambda m: m.confidence)
    name = re.sub(r"(?i)\s+file$", "", (best.name or "").strip())
    extension = (best.extension or "").strip()
    suffix = f" ({extension})" if re.fullmatch(r"\.\w{1,8}", extension) else ""
    return f"a {name}{suffix} file" if name else ""


def _looks_like_html(text_head: str, extension: str) -> bool:
    if text_head.startswith(("<!doctype html", "<html")):
        return True
    if text_head.startswith("<?xml") and "<html" in text_head:
        return True  # XHTML
    if extension in HTML_EXTENSIONS:
        return True
    if extension in MARKDOWN_EXTENSIONS:
        return False  # Markdown may hold inline HTML; the extension is trusted among text types
    if re.search(r"<(html|head|body)[\s>]", text_head):
        return True
    return text_head.startswith("<") and len(re.findall(r"</(p|div|h[1-6]|li|table|span|a)>", text_head)) >= 2
