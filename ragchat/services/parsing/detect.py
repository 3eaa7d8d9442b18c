"""Which parser a file needs, decided from its bytes, never from its name (R-DOC-7).

A PNG renamed `.pdf` is refused as a PNG; an old binary Office file, a password-protected Office
file or a plain ZIP each get a refusal that says what the file is and what to upload instead.
Among text types the bytes decide where they can (HTML, RTF, an email's headers); the name only
chooses between text, Markdown and CSV, which the same bytes can all be.

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from pathlib import PurePosixPath

from ragchat.services.errors import CorruptDocumentError, EncryptedDocumentError, UnsupportedDocumentError

MARKDOWN_EXTENSIONS = {".md", ".markdown", ".mdown", ".mkd", ".mkdn"}
HTML_EXTENSIONS = {".html", ".htm", ".xhtml"}
CSV_EXTENSIONS = {".csv", ".tsv"}
SUPPORTED = (
    "PDF, Word (.docx), PowerPoint (.pptx), Excel (.xlsx), CSV, OpenDocument (.odt, .ods, .odp), RTF, "
    "email (.eml), HTML, Markdown or plain text"
)
ODF_KINDS = {
    "application/vnd.oasis.opendocument.text": "odt",
    "application/vnd.oasis.opendocument.spreadsheet": "ods",
    "application/vnd.oasis.opendocument.presentation": "odp",
}
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# Stream names inside an OLE container, as its directory stores them (UTF-16LE).
_OLE_ENCRYPTED = "EncryptedPackage".encode("utf-16-le")
_OLE_OUTLOOK = "__substg1.0_".encode("utf-16-le")
# Header fields an email file starts with; two of them in the first lines make it an email.
_EMAIL_FIELDS = {
    "from",
    "to",
    "cc",
    "subject",
    "date",
    "message-id",
    "mime-version",
    "received",
    "return-path",
    "delivered-to",
    "reply-to",
    "x-mailer",
    "content-type",
    "sender",
}
_EMAIL_ANCHORS = {"from", "received", "message-id", "mime-version", "return-path", "delivered-to"}


def detect_kind(*, data: bytes, filename: str) -> str:
    """Return the parser kind for these bytes, or raise UnsupportedDocumentError."""
    extension = PurePosixPath(filename.lower()).suffix
    if _looks_like_pdf(data):
        return "pdf"
    if data.startswith(b"PK\x03\x04"):
        return _zip_kind(data)
    if data.startswith(OLE_MAGIC):
        _refuse_ole(data)
    if data.lstrip(b"\xef\xbb\xbf \t\r\n")[:5] == b"{\\rtf":
        return "rtf"
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
    if _looks_like_email(text_head):
        return "eml"
    if _looks_like_html(text_head, extension):
        return "html"
    if extension in MARKDOWN_EXTENSIONS:
        return "markdown"
    if extension in CSV_EXTENSIONS:
        from ragchat.services.parsing.spreadsheet import looks_like_csv

        if looks_like_csv(head.decode(codec, errors="ignore") + "\n"):
            return "csv"
    return "text"


def _refuse_ole(data: bytes) -> None:
    """An OLE container: a password-protected Office file, an Outlook message or an old Office file."""
    if _OLE_ENCRYPTED in data:
        raise EncryptedDocumentError(
            "This Office file is password-protected; remove the password (File > Info > Protect) and upload it again."
        )
    if _OLE_OUTLOOK in data:
        raise UnsupportedDocumentError(
            "Outlook .msg files are not supported; save the email as .eml (or PDF) and upload it again."
        )
    raise UnsupportedDocumentError(
        "This is an old Microsoft Office file (.doc/.xls/.ppt); save it as .docx, .xlsx, .pptx or PDF and upload it again."
    )


def _looks_like_email(text_head: str) -> bool:
    """The file opens with a block of header fields ("From: ...", "Subject: ..."), as a saved email does."""
    fields: set[str] = set()
    lines = text_head.split("\n")
    if not any(not line.strip() for line in lines):
        lines = lines[:-1]  # the head ends inside the headers: its last line may be cut
    for line in lines[:200]:
        line = line.rstrip("\r")
        if not line:
            break
        if line[0] in " \t":
            if not fields:
                return False
            continue  # a folded header line
        name, colon, _ = line.partition(":")
        if not colon or not re.fullmatch(r"[a-z0-9-]{1,60}", name):
            return False
        fields.add(name)
    known = fields & _EMAIL_FIELDS
    return len(known) >= 2 and bool(known & _EMAIL_ANCHORS)


def _looks_like_pdf(data: bytes) -> bool:
    """%PDF- at the start; readers also accept it after junk within 1 KB if the file ends like a PDF."""
    if data.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"%PDF-"):
        return True
    return 0 < data.find(b"%PDF-", 0, 1024) and b"%%EOF" in data[-2048:]


def _zip_kind(data: bytes) -> str:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
            mimetype = ""
            if "mimetype" in names:  # OpenDocument: the type, stored first and uncompressed
                with archive.open("mimetype") as member:
                    mimetype = member.read(100).decode("ascii", errors="ignore").strip()
    except (zipfile.BadZipFile, ValueError, OSError, RuntimeError, EOFError, zlib.error) as e:
        raise CorruptDocumentError(
            "This file looks like an Office document or ZIP archive but is damaged and cannot be opened."
        ) from e
    if "word/document.xml" in names:
        return "docx"
    if "ppt/presentation.xml" in names:
        return "pptx"
    if "xl/workbook.xml" in names:
        return "xlsx"
    if mimetype in ODF_KINDS:
        return ODF_KINDS[mimetype]
    if mimetype.startswith("application/vnd.oasis.opendocument."):
        raise UnsupportedDocumentError(
            "This OpenDocument type is not supported; save it as a text document, spreadsheet or presentation."
        )
    raise UnsupportedDocumentError(f"This is a ZIP archive, not a document; upload {SUPPORTED} files.")


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
    return f"This file{named} is not a supported document{looks}. Upload {SUPPORTED}."


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
