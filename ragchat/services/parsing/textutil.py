"""Small text functions the format parsers share: normalising, decoding, titles and sizes."""

from __future__ import annotations

import re
import unicodedata
from pathlib import PurePosixPath

from ragchat.services.parsing.filenames import safe_filename


def clean_text(text: str) -> str:
    """NFC, no NULs or stray control characters, tidy line ends; keeps paragraph breaks."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    text = re.sub(r"[\x00-\x08\x0b\x0e-\x1f\x7f]", "", text).replace("\x0c", "\n\n")
    text = re.sub(r"[ \t\u00a0]+", " ", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def clean_inline(text: str) -> str:
    text = unicodedata.normalize("NFC", text)
    text = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def first_line_title(text: str) -> str:
    line = text.strip().split("\n", 1)[0].strip()
    return clean_inline(line) if 0 < len(line) <= 100 else ""


def filename_title(filename: str) -> str:
    stem = PurePosixPath(safe_filename(filename)).stem
    return stem.replace("_", " ").strip() or "Untitled document"


def page_list(pages: list[int]) -> str:
    shown = ", ".join(str(page) for page in pages[:20])
    return shown + (f" and {len(pages) - 20} more" if len(pages) > 20 else "")


def human_size(size: int) -> str:
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MB"
    if size >= 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size} bytes"


_LATIN_FAMILY = {
    "cp1250",
    "cp1252",
    "cp1254",
    "cp1257",
    "latin_1",
    "iso8859_1",
    "iso8859_2",
    "iso8859_3",
    "iso8859_4",
    "iso8859_9",
    "iso8859_10",
    "iso8859_13",
    "iso8859_14",
    "iso8859_15",
    "iso8859_16",
    "mac_roman",
    "mac_latin2",
    "cp850",
    "cp437",
    "cp858",
}


def decode_text(data: bytes) -> tuple[str, list[str]]:
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
        return data.decode(encoding), [f"The text was not UTF-8; it was read as {encoding}. Check accented characters."]
    except (UnicodeDecodeError, LookupError):
        pass
    return data.decode("latin-1"), ["The text was not UTF-8; it was read as Latin-1. Check accented characters."]
