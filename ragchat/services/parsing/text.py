"""Plain text: paragraphs split at blank lines; the encoding is detected when it is not UTF-8."""

from __future__ import annotations

import re

from ragchat.services.parsing.base import MIME_TYPES, ParsedDocument, TextBlock
from ragchat.services.parsing.textutil import clean_text, decode_text, filename_title, first_line_title


def parse(*, data: bytes, filename: str, max_unpacked_bytes: int) -> ParsedDocument:
    text, warnings = decode_text(data)
    text = clean_text(text)
    blocks = [TextBlock(text=paragraph.strip()) for paragraph in re.split(r"\n\s*\n", text) if paragraph.strip()]
    title = (first_line_title(blocks[0].text) if blocks else "") or filename_title(filename)
    return ParsedDocument(
        mime_type=MIME_TYPES["text"], kind="text", title=title, pages=None, blocks=blocks, warnings=warnings
    )
