"""Tables as text that keeps rows and columns together: one line per row, each cell labelled with
its column's header ("Item: Stapler | Price: 12 GBP").

Every format with tables (Word, HTML, PowerPoint, spreadsheets, OpenDocument) renders them here.
Each row is its own block marked `is_row`, which the chunker keeps whole; since every row carries
its header, a chunk can never hold a row without knowing what its columns mean.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragchat.services.parsing.base import TextBlock
from ragchat.services.parsing.textutil import clean_inline

_DIGIT = re.compile(r"\d")
MAX_HEADER_CELL_CHARS = 60


def looks_like_header(row: Sequence[str]) -> bool:
    """A first row reads as column names: every cell filled, short, distinct and without numbers.
    ("Amount | Approval" is a header; "Annual leave | 28 days" is a key-value row.)"""
    cells = [cell for cell in row]
    return (
        len(cells) >= 2
        and all(cells)
        and len(set(cells)) == len(cells)
        and all(len(cell) <= MAX_HEADER_CELL_CHARS and not _DIGIT.search(cell) for cell in cells)
    )


def row_text(cells: Sequence[str], header: Sequence[str] | None) -> str:
    """'Header: value | Header: value'; empty cells are left out, cells past the header unlabelled."""
    parts = []
    for index, cell in enumerate(cells):
        if not cell:
            continue
        label = header[index] if header is not None and index < len(header) else ""
        parts.append(f"{label}: {cell}" if label and label != cell else cell)
    return " | ".join(parts)


def table_blocks(
    rows: Sequence[Sequence[str]],
    *,
    section: str | None = None,
    page_number: int | None = None,
    has_header: bool | None = None,
) -> list[TextBlock]:
    """One block per row. `has_header`: True or False when the format says so, None to judge
    from the first row (`looks_like_header`)."""
    rows = [[clean_inline(cell or "") for cell in row] for row in rows]
    rows = [row for row in rows if any(row)]
    if not rows:
        return []
    if has_header is None:
        has_header = len(rows) >= 2 and looks_like_header(rows[0])
    header = rows[0] if has_header and len(rows) >= 2 else None
    body = rows[1:] if header is not None else rows
    return [
        TextBlock(text=text, section=section, page_number=page_number, is_row=True)
        for text in (row_text(row, header) for row in body)
        if text
    ]
