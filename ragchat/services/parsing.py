"""Turn an uploaded file into text blocks that keep their page number and section heading.

The type is decided from the bytes, never from the file name (R-DOC-7): a PNG renamed `.pdf` is
refused as a PNG. Every refusal is a `DocumentError` subclass whose message is written for the
person who uploaded the file. Parsing uses well-kept libraries (pypdf, python-docx, BeautifulSoup
with lxml, markdown-it-py); nothing here executes or renders the document's content.
"""
from __future__ import annotations

import io
import logging
import re
import unicodedata
import warnings as py_warnings
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from ragchat.services.errors import (
    CorruptDocumentError,
    DocumentTooLargeError,
    EmptyDocumentError,
    EncryptedDocumentError,
    UnsupportedDocumentError,
)

logger = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 25 * 1024 * 1024
DEFAULT_MAX_UNPACKED_BYTES = 200 * 1024 * 1024

# A DOCX member that inflates more than this many times, and to more than the floor below, is a
# zip bomb: real Word XML compresses roughly 5-20x, a bomb's padding 1000x.
MAX_COMPRESSION_RATIO = 100
RATIO_CHECK_FLOOR_BYTES = 5 * 1024 * 1024
MAX_ZIP_MEMBERS = 10_000

MIME_TYPES = {
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "html": "text/html",
    "markdown": "text/markdown",
    "text": "text/plain",
}
MARKDOWN_EXTENSIONS = {".md", ".markdown", ".mdown", ".mkd", ".mkdn"}
HTML_EXTENSIONS = {".html", ".htm", ".xhtml"}


@dataclass(frozen=True)
class TextBlock:
    """A paragraph-sized piece of text; `is_heading` marks a section heading's own text."""

    text: str
    page_number: int | None = None
    section: str | None = None
    is_heading: bool = False


@dataclass(frozen=True)
class ParsedDocument:
    mime_type: str
    kind: str  # "pdf" | "docx" | "html" | "markdown" | "text"
    title: str
    pages: int | None
    blocks: list[TextBlock] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n\n".join(block.text for block in self.blocks)


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def parse_document(
    *,
    data: bytes,
    filename: str,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_unpacked_bytes: int = DEFAULT_MAX_UNPACKED_BYTES,
) -> ParsedDocument:
    """Detect the type from the content and parse it; raise a DocumentError the user can read."""
    if len(data) > max_bytes:
        raise DocumentTooLargeError(
            f"This file is {_human_size(len(data))}; the limit is {_human_size(max_bytes)}."
        )
    if not data or not data.strip():
        raise EmptyDocumentError("This file is empty.")
    kind = detect_kind(data=data, filename=filename)
    parser = {
        "pdf": _parse_pdf,
        "docx": _parse_docx,
        "html": _parse_html,
        "markdown": _parse_markdown,
        "text": _parse_text,
    }[kind]
    parsed = parser(data=data, filename=filename, max_unpacked_bytes=max_unpacked_bytes)
    if not any(block.text.strip() for block in parsed.blocks):
        raise EmptyDocumentError("This file contains no readable text.")
    return parsed


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
        raise UnsupportedDocumentError(
            "This file is named .docx but its content is not a Word document."
        )
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
        f"This file{named} is not a supported document{looks}. "
        "Upload PDF, Word (.docx), HTML, Markdown or plain text."
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


# --------------------------------------------------------------------------------------------
# PDF
# --------------------------------------------------------------------------------------------


def _parse_pdf(*, data: bytes, filename: str, max_unpacked_bytes: int) -> ParsedDocument:
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
                text = _clean_text(_extract_page_text(page, index, warnings))
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
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError, OSError, zlib.error) as e:
        raise CorruptDocumentError(
            "This PDF is damaged or incomplete and cannot be read; re-export or re-download it and upload it again."
        ) from e
    if not blocks:
        raise EmptyDocumentError(
            "No text could be extracted from this PDF. It is probably scanned images; "
            "text recognition (OCR) is not supported, so upload a PDF with selectable text."
        )
    if empty_pages:
        warnings.append(
            f"No text on page(s) {_page_list(empty_pages)} (scanned images are not read; OCR is not supported)."
        )
    title = metadata_title or _first_line_title(blocks[0].text) or _stem(filename)
    return ParsedDocument(
        mime_type=MIME_TYPES["pdf"], kind="pdf", title=title, pages=page_count, blocks=blocks, warnings=warnings
    )


_ENCRYPTED_PDF = "This PDF is password-protected; remove the password and upload it again."


def _unlock_pdf(reader, warnings: list[str]) -> None:
    """Open PDFs that only carry an owner password (print/copy restrictions); refuse real passwords."""
    from pypdf import PasswordType

    try:
        result = reader.decrypt("")
    except Exception as e:  # pypdf raises several types for unsupported crypto
        raise EncryptedDocumentError(_ENCRYPTED_PDF) from e
    if result == PasswordType.NOT_DECRYPTED:
        raise EncryptedDocumentError(_ENCRYPTED_PDF)
    warnings.append("This PDF carries usage restrictions; its text was read anyway.")


def _extract_page_text(page, index: int, warnings: list[str]) -> str:
    try:
        return page.extract_text() or ""
    except Exception as e:  # one broken page should not lose the others
        logger.info("pdf page %s: text extraction failed: %s", index + 1, e)
        warnings.append(f"Page {index + 1} could not be read and was skipped.")
        return ""


def _pdf_sections(reader, page_count: int) -> list[str | None]:
    """Section title per page from the PDF's outline (bookmarks): the last entry starting at or before it."""
    starts: list[tuple[int, str]] = []
    try:
        for item in _flatten_outline(reader.outline):
            number = reader.get_destination_page_number(item)
            title = _clean_inline(str(getattr(item, "title", "") or ""))
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


def _flatten_outline(outline) -> Iterator:
    for item in outline or []:
        if isinstance(item, list):
            yield from _flatten_outline(item)
        else:
            yield item


def _pdf_metadata_title(reader) -> str:
    try:
        title = reader.metadata.title if reader.metadata else None
    except Exception:
        return ""
    if not title:
        return ""
    # Office exporters write "Microsoft Word - minutes.docx"; the file's own name is the useful part.
    title = re.sub(r"^Microsoft (Word|PowerPoint|Excel) - ", "", _clean_inline(str(title)))
    return re.sub(r"\.(docx?|pptx?|xlsx?|odt|rtf)$", "", title, flags=re.IGNORECASE)


# --------------------------------------------------------------------------------------------
# DOCX
# --------------------------------------------------------------------------------------------


def _parse_docx(*, data: bytes, filename: str, max_unpacked_bytes: int) -> ParsedDocument:
    _check_zip_bomb(data, max_unpacked_bytes)
    import docx
    from docx.opc.exceptions import PackageNotFoundError
    from lxml.etree import XMLSyntaxError

    try:
        document = docx.Document(io.BytesIO(data))
        blocks = list(_docx_blocks(document))
        core_title = _clean_inline(document.core_properties.title or "")
    except (PackageNotFoundError, XMLSyntaxError, zipfile.BadZipFile, KeyError, ValueError, OSError) as e:
        raise CorruptDocumentError(
            "This Word document is damaged and cannot be read; open and re-save it in Word, then upload it again."
        ) from e
    first_heading = next((b.text for b in blocks if b.is_heading), "")
    title = core_title or first_heading or _stem(filename)
    return ParsedDocument(
        mime_type=MIME_TYPES["docx"], kind="docx", title=title, pages=None, blocks=blocks, warnings=[]
    )


def _check_zip_bomb(data: bytes, max_unpacked_bytes: int) -> None:
    """Refuse from the declared sizes, before anything is inflated (zipfile stops at the declared size)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as e:
        raise CorruptDocumentError("This Word document is damaged and cannot be opened.") from e
    if len(members) > MAX_ZIP_MEMBERS:
        raise DocumentTooLargeError("This Word document holds too many internal parts to be read safely.")
    total = sum(member.file_size for member in members)
    if total > max_unpacked_bytes:
        raise DocumentTooLargeError(
            f"This Word document unpacks to {_human_size(total)}, over the {_human_size(max_unpacked_bytes)} limit."
        )
    for member in members:
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size > RATIO_CHECK_FLOOR_BYTES and ratio > MAX_COMPRESSION_RATIO:
            raise DocumentTooLargeError(
                "This Word document is compressed suspiciously hard (a possible zip bomb) and was not opened."
            )


def _docx_blocks(document) -> Iterator[TextBlock]:
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    section: str | None = None
    for child in document.element.body.iterchildren():
        tag = child.tag.rsplit("}", 1)[-1]
        if tag == "p":
            paragraph = Paragraph(child, document)
            text = _clean_inline(paragraph.text)
            if not text:
                continue
            if _docx_heading_level(paragraph) is not None:
                section = text
                yield TextBlock(text=text, section=section, is_heading=True)
            else:
                yield TextBlock(text=text, section=section)
        elif tag == "tbl":
            text = _docx_table_text(Table(child, document))
            if text:
                yield TextBlock(text=text, section=section)


def _docx_heading_level(paragraph) -> int | None:
    """Heading by style ("Heading 2", "Title") or by an explicit outline level in the paragraph."""
    style_name = ""
    try:
        style_name = (paragraph.style.name or "") if paragraph.style is not None else ""
    except (KeyError, ValueError):
        style_name = ""
    match = re.match(r"(?i)heading\s*(\d+)", style_name)
    if match:
        return int(match.group(1))
    if style_name.lower() == "title":
        return 0
    outline = paragraph._p.xpath("./w:pPr/w:outlineLvl/@w:val")
    if outline and outline[0].isdigit() and int(outline[0]) < 9:
        return int(outline[0]) + 1
    return None


def _docx_table_text(table) -> str:
    rows = []
    for row in table.rows:
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            # merged cells come back once per grid column; keep one copy
            if id(cell._tc) in seen:
                continue
            seen.add(id(cell._tc))
            text = _clean_inline(cell.text)
            if text:
                cells.append(text)
        if cells:
            rows.append(" | ".join(cells))
    return "\n".join(rows)


# --------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------

# Dropped with their content: executable, invisible or site furniture.
HTML_DROP = [
    "script", "style", "noscript", "template", "iframe", "object", "embed", "svg", "canvas",
    "nav", "aside", "footer", "form", "button", "select", "head", "link", "meta",
]
HTML_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
HTML_BLOCKS = {
    "p", "div", "li", "ul", "ol", "pre", "blockquote", "table", "thead", "tbody", "tr", "section",
    "article", "main", "dl", "dt", "dd", "figure", "figcaption", "address", "details", "summary",
    "header", "body", "caption", "hr",
}


def _parse_html(*, data: bytes, filename: str, max_unpacked_bytes: int) -> ParsedDocument:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(data, "lxml")  # bytes: lets it honour <meta charset>
    title_tag = soup.find("title")
    head_title = _clean_inline(title_tag.get_text(" ")) if title_tag else ""
    for tag in soup.find_all(HTML_DROP):
        tag.decompose()
    main = soup.find("main") or soup.find("article")
    root = main or soup.body or soup
    if main is None:  # no marked main content: drop the site header, keep headers of sections
        for header in root.find_all("header"):
            if header.find_parent(["article", "main", "section"]) is None:
                header.decompose()
    blocks = _HtmlWalker().run(root)
    first_heading = next((b.text for b in blocks if b.is_heading), "")
    title = head_title or first_heading or _stem(filename)
    return ParsedDocument(
        mime_type=MIME_TYPES["html"], kind="html", title=title, pages=None, blocks=blocks, warnings=[]
    )


class _HtmlWalker:
    """Walk the tree in order; block elements end a text block, headings start a section."""

    def __init__(self) -> None:
        self.blocks: list[TextBlock] = []
        self.buffer: list[str] = []
        self.section: str | None = None

    def run(self, root) -> list[TextBlock]:
        self._walk(root)
        self._flush()
        return self.blocks

    def _walk(self, node) -> None:
        from bs4 import NavigableString, Tag

        for child in node.children:
            if isinstance(child, Tag):
                self._tag(child)
            elif type(child) is NavigableString:  # skips comments, CDATA, doctype, processing instructions
                self.buffer.append(str(child))

    def _tag(self, tag) -> None:
        name = (tag.name or "").lower()
        if name in HTML_HEADINGS:
            self._flush()
            text = _clean_inline(tag.get_text(" "))
            if text:
                self.section = text
                self.blocks.append(TextBlock(text=text, section=text, is_heading=True))
        elif name == "br":
            self.buffer.append("\n")
        elif name in {"td", "th"}:
            self._walk(tag)
            self.buffer.append(" | ")
        elif name in HTML_BLOCKS:
            self._flush()
            self._walk(tag)
            self._flush()
        else:
            self._walk(tag)

    def _flush(self) -> None:
        text = _clean_inline("".join(self.buffer)).strip(" |")
        self.buffer = []
        if text:
            self.blocks.append(TextBlock(text=text, section=self.section))


# --------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------

FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)---[ \t]*\n", re.DOTALL)


def _parse_markdown(*, data: bytes, filename: str, max_unpacked_bytes: int) -> ParsedDocument:
    from markdown_it import MarkdownIt

    text, warnings = _decode(data)
    text = _clean_text(text)
    front_title = ""
    match = FRONT_MATTER.match(text)
    if match:
        title_line = re.search(r"(?m)^title:\s*['\"]?(.+?)['\"]?\s*$", match.group(1))
        front_title = _clean_inline(title_line.group(1)) if title_line else ""
        text = text[match.end():]
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    blocks = _markdown_blocks(tokens)
    first_heading = next((b.text for b in blocks if b.is_heading), "")
    title = front_title or first_heading or _stem(filename)
    return ParsedDocument(
        mime_type=MIME_TYPES["markdown"], kind="markdown", title=title, pages=None, blocks=blocks, warnings=warnings
    )


def _markdown_blocks(tokens) -> list[TextBlock]:
    blocks: list[TextBlock] = []
    section: str | None = None
    in_heading = False
    in_table = False
    row: list[str] = []
    for token in tokens:
        kind = token.type
        if kind == "heading_open":
            in_heading = True
        elif kind == "heading_close":
            in_heading = False
        elif kind == "table_open":
            in_table = True
        elif kind == "table_close":
            in_table = False
        elif kind == "inline":
            text = _clean_inline(_markdown_inline_text(token))
            if not text:
                continue
            if in_heading:
                section = text
                blocks.append(TextBlock(text=text, section=section, is_heading=True))
            elif in_table:
                row.append(text)
            else:
                blocks.append(TextBlock(text=text, section=section))
        elif kind == "tr_close":
            if row:
                blocks.append(TextBlock(text=" | ".join(row), section=section))
            row = []
        elif kind in {"fence", "code_block"}:
            code = token.content.strip("\n")
            if code.strip():
                blocks.append(TextBlock(text=code, section=section))
        elif kind == "html_block":
            html_text = _html_fragment_text(token.content)
            if html_text:
                blocks.append(TextBlock(text=html_text, section=section))
    return blocks


def _markdown_inline_text(token) -> str:
    parts: list[str] = []
    for child in token.children or []:
        if child.type in {"text", "code_inline"}:
            parts.append(child.content)
        elif child.type in {"softbreak", "hardbreak"}:
            parts.append(" ")
        elif child.type == "image":
            parts.append(child.content)  # alt text
        elif child.type == "html_inline":
            continue  # raw HTML tags are markup, not text
    return "".join(parts)


def _html_fragment_text(fragment: str) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(fragment, "lxml")
    for tag in soup.find_all(HTML_DROP):
        tag.decompose()
    return _clean_inline(soup.get_text(" "))


# --------------------------------------------------------------------------------------------
# Plain text
# --------------------------------------------------------------------------------------------


def _parse_text(*, data: bytes, filename: str, max_unpacked_bytes: int) -> ParsedDocument:
    text, warnings = _decode(data)
    text = _clean_text(text)
    blocks = [
        TextBlock(text=paragraph.strip())
        for paragraph in re.split(r"\n\s*\n", text)
        if paragraph.strip()
    ]
    title = (_first_line_title(blocks[0].text) if blocks else "") or _stem(filename)
    return ParsedDocument(
        mime_type=MIME_TYPES["text"], kind="text", title=title, pages=None, blocks=blocks, warnings=warnings
    )


_LATIN_FAMILY = {
    "cp1250", "cp1252", "cp1254", "cp1257", "latin_1", "iso8859_1", "iso8859_2", "iso8859_3", "iso8859_4",
    "iso8859_9", "iso8859_10", "iso8859_13", "iso8859_14", "iso8859_15", "iso8859_16", "mac_roman",
    "mac_latin2", "cp850", "cp437", "cp858",
}


def _decode(data: bytes) -> tuple[str, list[str]]:
    """UTF-8 (with or without BOM) or UTF-16 by BOM; otherwise detect, and say so."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace"), []
    try:
        return data.decode("utf-8-sig"), []
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    best = from_bytes(data[:200_000]).best()
    encoding = best.encoding if best is not None and best.encoding else "cp1252"
    # Short Western text is ambiguous among the single-byte Latin code pages; detectors guess
    # cp1250 for "Crème brûlée". Windows-1252 is what such files nearly always are.
    if encoding in _LATIN_FAMILY:
        encoding = "cp1252"
    try:
        return data.decode(encoding), [
            f"The text was not UTF-8; it was read as {encoding}. Check accented characters."
        ]
    except (UnicodeDecodeError, LookupError):
        pass
    return data.decode("latin-1"), ["The text was not UTF-8; it was read as Latin-1. Check accented characters."]


# --------------------------------------------------------------------------------------------
# Filenames and small helpers
# --------------------------------------------------------------------------------------------

MAX_FILENAME_CHARS = 150
MAX_FILENAME_BYTES = 240
WINDOWS_RESERVED = re.compile(r"(?i)^(con|prn|aux|nul|com[0-9]|lpt[0-9])$")


def safe_filename(name: str | bytes) -> str:
    """A name safe to show and to store: no directories, control characters or reserved names."""
    if isinstance(name, bytes):
        name = name.decode("utf-8", errors="replace")
    name = unicodedata.normalize("NFC", name)
    name = name.replace("\\", "/").rsplit("/", 1)[-1]  # drop any directory part, absolute or ../
    name = re.sub(r"[\t\n\r\v\f]", " ", name)
    name = "".join(
        ch for ch in name if unicodedata.category(ch) not in {"Cc", "Cf", "Cs", "Co", "Cn"}
    )
    name = re.sub(r'[<>:"|?*]', "_", name)
    name = re.sub(r"\s+", " ", name).strip(" .")
    stem, dot, extension = name.rpartition(".")
    if not dot:
        stem, extension = name, ""
    if extension and not re.fullmatch(r"[\w-]{1,16}", extension):
        stem, extension = name, ""  # a long or odd "extension" is part of the name
    stem = stem.strip(" .")
    if WINDOWS_RESERVED.match(stem.split(".")[0] if stem else ""):
        stem = f"_{stem}"
    if not stem:
        stem = "document"
    suffix = f".{extension}" if extension else ""
    room = MAX_FILENAME_CHARS - len(suffix)
    stem = stem[:room]
    while len((stem + suffix).encode("utf-8")) > MAX_FILENAME_BYTES:
        stem = stem[:-1]
    return (stem.rstrip(" .") or "document") + suffix


def _clean_text(text: str) -> str:
    """NFC, no NULs or stray control characters, tidy line ends; keeps paragraph breaks."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    text = re.sub(r"[\x00-\x08\x0b\x0e-\x1f\x7f]", "", text).replace("\x0c", "\n\n")
    text = re.sub(r"[ \t\u00a0]+", " ", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _clean_inline(text: str) -> str:
    text = unicodedata.normalize("NFC", text)
    text = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def _first_line_title(text: str) -> str:
    line = text.strip().split("\n", 1)[0].strip()
    return _clean_inline(line) if 0 < len(line) <= 100 else ""


def _stem(filename: str) -> str:
    stem = PurePosixPath(safe_filename(filename)).stem
    return stem.replace("_", " ").strip() or "Untitled document"


def _page_list(pages: list[int]) -> str:
    shown = ", ".join(str(page) for page in pages[:20])
    return shown + (f" and {len(pages) - 20} more" if len(pages) > 20 else "")


def _human_size(size: int) -> str:
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MB"
    if size >= 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size} bytes"
