"""Rich Text Format (.rtf; striprtf): the text WordPad, TextEdit and older tools save.

RTF has no reliable headings; paragraphs are split at blank lines like plain text. Embedded
objects and pictures are skipped by the library, never opened.
"""

from __future__ import annotations

import re

from ragchat.services.errors import CorruptDocumentError
from ragchat.services.parsing.base import MIME_TYPES, ParsedDocument, TextBlock
from ragchat.services.parsing.textutil import clean_text, filename_title, first_line_title


def parse(*, data: bytes, filename: str, max_unpacked_bytes: int) -> ParsedDocument:
    from striprtf.striprtf import rtf_to_text

    # RTF is 7-bit ASCII with escapes for everything else; Latin-1 keeps any stray 8-bit byte.
    source = data.decode("latin-1")
    try:
        text = rtf_to_text(source, errors="replace")
    except (ValueError, IndexError, LookupError, RecursionError) as e:
        raise CorruptDocumentError(
            "This RTF file is damaged and cannot be read; re-save it and upload it again."
        ) from e
    text = clean_text(text)
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n|\n", text) if p.strip()]
    blocks = [TextBlock(text=paragraph) for paragraph in paragraphs]
    title = (first_line_title(blocks[0].text) if blocks else "") or filename_title(filename)
    return ParsedDocument(mime_type=MIME_TYPES["rtf"], kind="rtf", title=title, pages=None, blocks=blocks, warnings=[])
