"""Spreadsheets: Excel (.xlsx, .xlsm; openpyxl) and CSV (the standard library's csv).

Each sheet is a section. The first row with two or more filled cells is the header; every row
after it becomes one line whose cells carry their column's name ("Item: Stapler | Price: 12 GBP",
tables.py), so a chunk cut anywhere in a long sheet still says what its numbers are. Rows above
the header (a sheet's own title) are kept as text.

Formulas are read as the values Excel saved with them (`data_only`); external links and macros are
neither followed nor run. Limits: `MAX_ROWS` rows with data per file (beyond them the file is
refused with a sentence), `MAX_COLUMNS` columns, and a sheet stops after `MAX_EMPTY_RUN` empty rows
in a row (styling a whole column leaves a million empty rows behind; reading them costs time and
yields nothing).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import zipfile
from collections.abc import Iterable, Sequence
from typing import Any

from ragchat.services.errors import CorruptDocumentError, DocumentTooLargeError
from ragchat.services.parsing.archive import check_zip
from ragchat.services.parsing.base import MIME_TYPES, ParsedDocument, TextBlock
from ragchat.services.parsing.tables import row_text
from ragchat.services.parsing.textutil import clean_inline, decode_text, filename_title

MAX_ROWS = 100_000
MAX_COLUMNS = 200
MAX_EMPTY_RUN = 1_000

_TOO_MANY_ROWS = (
    f"This spreadsheet has more than {MAX_ROWS:,} rows with data, more than can be searched well; "
    "split it into smaller files or upload only the part people ask about."
)
# XML entity declarations have no place in an office file: they are how XXE and "billion laughs" attacks work.
ENTITIES_MESSAGE = "This {what} declares XML entities, which are refused for safety; re-save it and upload it again."
_DAMAGED_XLSX = "This Excel file is damaged and cannot be read; open and re-save it in Excel, then upload it again."


def parse_xlsx(*, data: bytes, filename: str, max_unpacked_bytes: int) -> ParsedDocument:
    check_zip(data, max_unpacked_bytes=max_unpacked_bytes, what="Excel file")
    from defusedxml import DefusedXmlException  # openpyxl parses with defusedxml when it is installed
    from openpyxl import load_workbook
    from openpyxl.utils.exceptions import InvalidFileException

    try:
        workbook = load_workbook(
            io.BytesIO(data), read_only=True, data_only=True, keep_links=False, keep_vba=False, rich_text=False
        )
    except DefusedXmlException as e:  # a ValueError: before the general case
        raise CorruptDocumentError(ENTITIES_MESSAGE.format(what="Excel file")) from e
    except (InvalidFileException, zipfile.BadZipFile, KeyError, ValueError, TypeError, OSError, SyntaxError) as e:
        if _caused_by(e, DefusedXmlException):  # openpyxl wraps it: "Unable to read workbook"
            raise CorruptDocumentError(ENTITIES_MESSAGE.format(what="Excel file")) from e
        raise CorruptDocumentError(_DAMAGED_XLSX) from e
    reader = SheetReader(max_text=max_unpacked_bytes)
    try:
        for sheet in workbook.worksheets:
            name = clean_inline(sheet.title) or "Sheet"
            if (sheet.max_column or 0) > MAX_COLUMNS:
                reader.warnings.append(f"Sheet “{name}”: only the first {MAX_COLUMNS} columns were read.")
            rows = sheet.iter_rows(max_col=MAX_COLUMNS, values_only=True)
            reader.sheet(name, rows)
        title = clean_inline(workbook.properties.title or "") if workbook.properties else ""
    except DocumentTooLargeError:
        raise
    except DefusedXmlException as e:
        raise CorruptDocumentError(ENTITIES_MESSAGE.format(what="Excel file")) from e
    except (KeyError, ValueError, TypeError, OSError, SyntaxError, zipfile.BadZipFile) as e:
        raise CorruptDocumentError(_DAMAGED_XLSX) from e
    finally:
        workbook.close()
    return ParsedDocument(
        mime_type=MIME_TYPES["xlsx"],
        kind="xlsx",
        title=title or filename_title(filename),
        pages=None,
        blocks=reader.blocks,
        warnings=reader.warnings,
    )


def _caused_by(error: BaseException | None, kind: type[BaseException]) -> bool:
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, kind):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


def parse_csv(*, data: bytes, filename: str, max_unpacked_bytes: int) -> ParsedDocument:
    text, warnings = decode_text(data)
    title = filename_title(filename)
    reader = SheetReader(max_text=max_unpacked_bytes, warnings=warnings)
    try:
        rows = csv.reader(io.StringIO(text, newline=""), dialect=sniff_dialect(text))
        reader.sheet(title, rows)
    except csv.Error as e:
        raise CorruptDocumentError(f"This CSV file cannot be read ({e}); check its quoting and upload it again.") from e
    return ParsedDocument(
        mime_type=MIME_TYPES["csv"], kind="csv", title=title, pages=None, blocks=reader.blocks, warnings=reader.warnings
    )


def sniff_dialect(text: str) -> type[csv.Dialect] | csv.Dialect:
    """The delimiter and quoting of a CSV (comma, semicolon, tab or bar), from its first lines."""
    sample = "\n".join(text[:20_000].splitlines()[:50])
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|")
    except csv.Error:
        return csv.excel


def looks_like_csv(text: str) -> bool:
    """Two or more columns, the same number on most of the first lines."""
    lines = [line for line in text[:20_000].splitlines()[:50] if line.strip()]
    if len(lines) < 2:
        return False
    try:
        rows = list(csv.reader(lines[:-1] if len(lines) > 2 else lines, dialect=sniff_dialect(text)))
    except csv.Error:
        return False
    widths = [len(row) for row in rows]
    common = max(set(widths), key=widths.count)
    return common >= 2 and widths.count(common) >= 0.8 * len(widths)


class SheetReader:
    """Turns rows of cell values into blocks, sheet by sheet, within the limits."""

    def __init__(self, *, max_text: int, warnings: list[str] | None = None) -> None:
        self.blocks: list[TextBlock] = []
        self.warnings: list[str] = list(warnings or [])
        self.max_text = max_text
        self.rows = 0
        self.chars = 0

    def sheet(self, name: str, rows: Iterable[Sequence[Any]]) -> None:
        header: list[str] | None = None
        heading_done = False
        body_rows = 0
        empty_run = 0
        for number, values in enumerate(rows, start=1):
            cells = [_cell_text(value) for value in values]
            while cells and not cells[-1]:
                cells.pop()
            if not cells:
                empty_run += 1
                if empty_run >= MAX_EMPTY_RUN:
                    self.warnings.append(
                        f"Sheet “{name}”: reading stopped at row {number:,} after {MAX_EMPTY_RUN:,} empty rows."
                    )
                    break
                continue
            empty_run = 0
            if not heading_done:  # the sheet's name opens its own chunk
                self.blocks.append(TextBlock(text=name, section=name, is_heading=True))
                heading_done = True
            if header is None and sum(1 for cell in cells if cell) >= 2:
                header = cells
                continue
            if header is None:  # a title or note above the table
                self._add(TextBlock(text=" ".join(cell for cell in cells if cell), section=name))
                continue
            self.rows += 1
            body_rows += 1
            if self.rows > MAX_ROWS:
                raise DocumentTooLargeError(_TOO_MANY_ROWS)
            text = row_text(cells, header)
            if text:
                self._add(TextBlock(text=text, section=name, is_row=True))
        if header is not None and not body_rows:
            # a header with no rows under it is still the sheet's content
            self._add(TextBlock(text=" | ".join(cell for cell in header if cell), section=name))

    def _add(self, block: TextBlock) -> None:
        self.chars += len(block.text)
        if self.chars > self.max_text:
            raise DocumentTooLargeError(
                "This spreadsheet holds more text than the limit allows; split it into smaller files."
            )
        self.blocks.append(block)


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return f"{value:.10g}" if not value.is_integer() else str(int(value))
    if isinstance(value, dt.datetime):
        return value.date().isoformat() if value.time() == dt.time() else value.isoformat(sep=" ", timespec="minutes")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    return clean_inline(str(value))
