"""Small, real documents generated in code: the evaluation corpus (corpus.py) and the tests use them.

Nothing binary is committed; every file is built at the moment it is needed with the same
libraries a user's tools would use (fpdf2 for PDF, python-docx for Word, python-pptx for PowerPoint,
XlsxWriter for Excel (it saves formulas with their results, as Excel does), odfpy for OpenDocument,
the standard library's email for .eml, pypdf to encrypt).
"""

from __future__ import annotations

import html
import io
import re
import struct
import zipfile
import zlib

# fpdf2's built-in fonts are Latin-1 only; typographic characters are mapped to plain ones.
_PDF_REPLACEMENTS = {
    "\u2014": "-",
    "\u2013": "-",
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u2026": "...",
}


def _latin1(text: str) -> str:
    for bad, good in _PDF_REPLACEMENTS.items():
        text = text.replace(bad, good)
    return text.encode("latin-1", errors="replace").decode("latin-1")


def make_pdf(
    pages: list[str],
    *,
    title: str = "Test document",
    sections: list[str | None] | None = None,
    encrypt_password: str | None = None,
) -> bytes:
    """One PDF page per string (long text wraps, and may spill onto extra pages).

    `sections[i]`, when given, adds a bookmark (outline entry) at the start of page i.
    """
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_title(title)
    pdf.set_auto_page_break(auto=False)
    pdf.set_font("helvetica", size=9)
    for index, text in enumerate(pages):
        pdf.add_page()
        if sections and index < len(sections) and sections[index]:
            pdf.start_section(_latin1(sections[index]))
        pdf.multi_cell(0, 4, _latin1(text))
    data = bytes(pdf.output())
    if encrypt_password is not None:
        data = encrypt_pdf(data, password=encrypt_password)
    return data


def encrypt_pdf(data: bytes, *, password: str) -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def make_scanned_pdf(page_count: int = 2) -> bytes:
    """Pages that hold only drawings (as a scanner's images would): no extractable text."""
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    for _ in range(page_count):
        pdf.add_page()
        pdf.set_fill_color(120, 120, 120)
        for row in range(20):
            pdf.rect(20, 20 + row * 12, 170, 6, style="F")
    return bytes(pdf.output())


def scan_image(text: str, *, dpi: int = 200, seed: int = 0):
    """`text` typeset on an A4 page as a scanner would deliver it: a greyscale image, slightly
    rotated, with speckle noise (Pillow's own bundled font, so it renders the same everywhere)."""
    import random
    import textwrap

    from PIL import Image, ImageDraw, ImageFont

    width, height = int(8.27 * dpi), int(11.69 * dpi)
    image = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=max(12, dpi // 7))
    margin, y = dpi, dpi
    line_height = int(font.size * 1.5)
    for paragraph in text.split("\n"):
        for line in textwrap.wrap(paragraph, width=60) or [""]:
            draw.text((margin, y), line, fill=20, font=font)
            y += line_height
    rng = random.Random(seed)
    pixels = image.load()
    for _ in range(width * height // 400):  # speckle: dust and toner
        x, yy = rng.randrange(width), rng.randrange(height)
        pixels[x, yy] = rng.choice((0, 90, 180))
    return image.rotate(0.4, resample=Image.Resampling.BICUBIC, fillcolor=255)


def make_image_pdf(pages: list[str | None], *, dpi: int = 200, text_pages: dict[int, str] | None = None) -> bytes:
    """A scanned PDF: each string becomes a page holding only an image of that text (no text layer).
    `text_pages` {index: text} makes those pages ordinary text pages instead (a mixed PDF)."""
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_auto_page_break(auto=False)
    pdf.set_font("helvetica", size=11)
    for index, text in enumerate(pages):
        pdf.add_page()
        if text_pages and index in text_pages:
            pdf.multi_cell(0, 5, _latin1(text_pages[index]))
            continue
        buffer = io.BytesIO()
        scan_image(text or "", dpi=dpi, seed=index).save(buffer, format="PNG")
        pdf.image(buffer, x=0, y=0, w=210, h=297)
    return bytes(pdf.output())


def make_corrupt_scan_pdf() -> bytes:
    """A scanned PDF whose page image is damaged: the file opens, the picture on it does not decode."""
    data = make_image_pdf(["This scan was damaged on its way to the archive."])
    start = data.index(b"stream", data.index(b"/Subtype /Image")) + len(b"stream\n")
    middle = start + 200
    return data[:middle] + bytes(len(data[middle : middle + 4000])) + data[middle + 4000 :]


def make_corrupt_pdf() -> bytes:
    """A real PDF cut off part-way, as an interrupted download leaves it."""
    data = make_pdf(["This document was cut off in transit. " * 40] * 3)
    return data[: len(data) // 2]


def make_docx(
    sections: list[tuple[str, list[str]]],
    *,
    title: str | None = None,
    table: list[list[str]] | None = None,
    heading_level: int = 1,
    tables: dict[int, list[list[str]]] | None = None,
) -> bytes:
    """A Word document: optional Title paragraph, then each (heading, paragraphs) section.

    `table`, when given, is added (rows of cell strings) at the end of the first section;
    `tables[i]` at the end of section i.
    """
    import docx

    document = docx.Document()
    if title:
        document.core_properties.title = title
        document.add_heading(title, level=0)
    for index, (heading, paragraphs) in enumerate(sections):
        document.add_heading(heading, level=heading_level)
        for paragraph in paragraphs:
            document.add_paragraph(paragraph)
        rows = table if table and index == 0 else (tables or {}).get(index)
        if rows:
            grid = document.add_table(rows=len(rows), cols=len(rows[0]))
            for r, row in enumerate(rows):
                for c, value in enumerate(row):
                    grid.cell(r, c).text = value
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def make_zip_bomb_docx(*, padding_bytes: int = 20 * 1024 * 1024) -> bytes:
    """A valid DOCX plus a member of zeros that deflates about 1000:1 (20 MB -> ~20 KB)."""
    return add_zip_padding(make_docx([("Harmless", ["Nothing to see here."])]), "word/media/padding.bin", padding_bytes)


def add_zip_padding(data: bytes, member_name: str, padding_bytes: int = 20 * 1024 * 1024) -> bytes:
    """The same ZIP-based file (Office, OpenDocument) plus a member of zeros: a zip bomb."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            target.writestr(item, source.read(item.filename))
        with target.open(member_name, "w") as member:
            block = b"\0" * (1024 * 1024)
            remaining = padding_bytes
            while remaining > 0:
                member.write(block[: min(remaining, len(block))])
                remaining -= len(block)
    return out.getvalue()


Rows = list[list[str]]


def make_pptx(
    slides: list[tuple[str, list[str]]],
    *,
    title: str | None = None,
    tables: dict[int, Rows] | None = None,
    notes: dict[int, str] | None = None,
) -> bytes:
    """A PowerPoint deck: one slide per (title, bullet points); `tables[i]` adds a table to slide i,
    `notes[i]` speaker notes."""
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    if title:
        deck.core_properties.title = title
    for index, (heading, bullets) in enumerate(slides):
        table = (tables or {}).get(index)
        slide = deck.slides.add_slide(deck.slide_layouts[5 if table and not bullets else 1])
        slide.shapes.title.text = heading
        if bullets:
            slide.placeholders[1].text_frame.text = "\n".join(bullets)
        if table:
            top = Inches(4.2) if bullets else Inches(1.8)
            shape = slide.shapes.add_table(len(table), len(table[0]), Inches(0.5), top, Inches(9), Inches(0.4))
            for r, row in enumerate(table):
                for c, value in enumerate(row):
                    shape.table.cell(r, c).text = value
        if notes and index in notes:
            slide.notes_slide.notes_text_frame.text = notes[index]
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def make_xlsx(sheets: dict[str, list[list]], *, title: str | None = None, formulas: dict | None = None) -> bytes:
    """An Excel workbook, one sheet per entry (rows of values). `formulas` {(sheet, "B4"): ("=B2+B3",
    result)} writes a formula with the result Excel would have saved with it."""
    import xlsxwriter

    out = io.BytesIO()
    workbook = xlsxwriter.Workbook(out, {"in_memory": True})
    if title:
        workbook.set_properties({"title": title})
    for name, rows in sheets.items():
        sheet = workbook.add_worksheet(name)
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                if value is not None:
                    sheet.write(r, c, value)
        for (sheet_name, cell), (formula, result) in (formulas or {}).items():
            if sheet_name == name:
                sheet.write_formula(cell, formula, None, result)
    workbook.close()
    return out.getvalue()


def make_xlsx_styled_empty_rows(rows: int = 1_000_000) -> bytes:
    """A small table followed by `rows` empty rows that carry a style, as a formatted whole column
    leaves them. XlsxWriter writes the workbook; the empty rows are spliced into its sheet as Excel
    stores them (writing a million rows through XlsxWriter takes 20 s)."""
    import xlsxwriter

    out = io.BytesIO()
    workbook = xlsxwriter.Workbook(out, {"in_memory": True})
    sheet = workbook.add_worksheet("Data")
    sheet.write_row(0, 0, ["Item", "Price"])
    sheet.write_row(1, 0, ["Stapler", "12 GBP"])
    sheet.set_row(2, None, workbook.add_format({"bold": True, "bg_color": "#FFFF00"}))
    workbook.close()
    styled = "".join(f'<row r="{r}" s="1" customFormat="1"/>' for r in range(3, 3 + rows))
    patched = io.BytesIO()
    with zipfile.ZipFile(out) as source, zipfile.ZipFile(patched, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            body = source.read(item.filename)
            if item.filename == "xl/worksheets/sheet1.xml":
                body = body.replace(b"</sheetData>", styled.encode("ascii") + b"</sheetData>")
                # the used range then spans the styled rows too, as Excel records it
                body = re.sub(rb'<dimension ref="[^"]*"/>', f'<dimension ref="A1:B{rows + 2}"/>'.encode(), body)
            target.writestr(item.filename, body)
    return patched.getvalue()


def make_csv(rows: Rows, *, delimiter: str = ",") -> bytes:
    import csv

    out = io.StringIO()
    csv.writer(out, delimiter=delimiter, lineterminator="\n").writerows(rows)
    return out.getvalue().encode("utf-8")


def make_eml(
    *,
    subject: str,
    body: str,
    sender: str = "Ola Nordmann <ola@example.com>",
    to: str = "team@example.com",
    date: str = "Mon, 03 Mar 2025 09:15:00 +0100",
    html_body: str | None = None,
    attachments: list[tuple[str, bytes]] | None = None,
) -> bytes:
    """A saved email (RFC 5322): a plain body, an optional HTML alternative, attachments by name."""
    from email.message import EmailMessage

    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = sender
    message["To"] = to
    message["Date"] = date
    message["Message-ID"] = "<" + str(abs(hash(subject))) + "@example.com>"
    message.set_content(body)
    if html_body is not None:
        message.add_alternative(html_body, subtype="html")
    for name, data in attachments or []:
        message.add_attachment(data, maintype="application", subtype="octet-stream", filename=name)
    return message.as_bytes()


def make_odt(
    sections: list[tuple[str, list[str]]],
    *,
    title: str | None = None,
    table: Rows | None = None,
    tables: dict[int, Rows] | None = None,
) -> bytes:
    """An OpenDocument text: (heading, paragraphs) sections; `table` at the end of the first,
    `tables[i]` at the end of section i."""
    from odf.opendocument import OpenDocumentText
    from odf.text import H, P

    document = OpenDocumentText()
    _odf_title(document, title)
    for index, (heading, paragraphs) in enumerate(sections):
        document.text.addElement(H(outlinelevel=1, text=heading))
        for paragraph in paragraphs:
            document.text.addElement(P(text=paragraph))
        rows = table if table and index == 0 else (tables or {}).get(index)
        if rows:
            document.text.addElement(_odf_table(f"Table{index + 1}", rows))
    out = io.BytesIO()
    document.write(out)
    return out.getvalue()


def make_ods(sheets: dict[str, list[list]], *, title: str | None = None, empty_repeated_rows: int = 0) -> bytes:
    """An OpenDocument spreadsheet; `empty_repeated_rows` ends the first sheet with one styled
    empty row repeated that many times, as LibreOffice writes a formatted column."""
    from odf.opendocument import OpenDocumentSpreadsheet
    from odf.table import TableCell, TableRow

    document = OpenDocumentSpreadsheet()
    _odf_title(document, title)
    for index, (name, rows) in enumerate(sheets.items()):
        table = _odf_table(name, rows)
        if index == 0 and empty_repeated_rows:
            row = TableRow(numberrowsrepeated=empty_repeated_rows)
            row.addElement(TableCell(numbercolumnsrepeated=16384))
            table.addElement(row)
        document.spreadsheet.addElement(table)
    out = io.BytesIO()
    document.write(out)
    return out.getvalue()


def make_odp(
    slides: list[tuple[str, list[str]]],
    *,
    title: str | None = None,
    tables: dict[int, Rows] | None = None,
    notes: dict[int, str] | None = None,
) -> bytes:
    """An OpenDocument presentation: a title frame and a text frame per slide, optional tables and notes."""
    from odf.draw import Frame, Page, TextBox
    from odf.namespaces import PRESENTATIONNS
    from odf.opendocument import OpenDocumentPresentation
    from odf.presentation import Notes
    from odf.style import MasterPage, PageLayout
    from odf.text import P

    document = OpenDocumentPresentation()
    _odf_title(document, title)
    layout = PageLayout(name="Layout")
    document.automaticstyles.addElement(layout)
    master = MasterPage(name="Default", pagelayoutname=layout)
    document.masterstyles.addElement(master)

    def frame(texts: list[str], y: str, role: str) -> Frame:
        box = Frame(width="24cm", height="3cm", x="1cm", y=y)
        box.setAttrNS(PRESENTATIONNS, "class", role)
        text_box = TextBox()
        for text in texts:
            text_box.addElement(P(text=text))
        box.addElement(text_box)
        return box

    for index, (heading, bullets) in enumerate(slides):
        page = Page(masterpagename=master, name=f"page{index + 1}")
        page.addElement(frame([heading], "1cm", role="title"))
        if bullets:
            page.addElement(frame(bullets, "5cm", role="outline"))
        if tables and index in tables:
            holder = Frame(width="24cm", height="5cm", x="1cm", y="10cm")
            holder.addElement(_odf_table(f"Table{index}", tables[index]))
            page.addElement(holder)
        if notes and index in notes:
            notes_element = Notes()
            notes_element.addElement(frame([notes[index]], "15cm", role="notes"))
            page.addElement(notes_element)
        document.presentation.addElement(page)
    out = io.BytesIO()
    document.write(out)
    return out.getvalue()


def _odf_title(document, title: str | None) -> None:
    if title:
        from odf.dc import Title

        document.meta.addElement(Title(text=title))


def _odf_table(name: str, rows: list[list]):
    from odf.table import Table, TableCell, TableRow
    from odf.text import P

    table = Table(name=name)
    for row in rows:
        element = TableRow()
        for value in row:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                cell = TableCell(valuetype="float", value=value)
            else:
                cell = TableCell(valuetype="string")
            if value is not None and value != "":
                cell.addElement(P(text=str(value)))
            element.addElement(cell)
        table.addElement(element)
    return table


def make_rtf(paragraphs: list[str]) -> bytes:
    """A Rich Text Format document as WordPad writes it (non-ASCII as \\u escapes)."""

    def escape(text: str) -> str:
        out = []
        for char in text:
            if char in "\\{}":
                out.append("\\" + char)
            elif ord(char) > 127:
                out.append(f"\\u{ord(char) if ord(char) < 32768 else ord(char) - 65536}?")
            else:
                out.append(char)
        return "".join(out)

    body = "".join(f"\\pard {escape(paragraph)}\\par\n" for paragraph in paragraphs)
    return ("{\\rtf1\\ansi\\deff0{\\fonttbl{\\f0 Calibri;}}\n" + body + "}").encode("ascii")


def make_html(
    sections: list[tuple[str, list[str]]],
    *,
    title: str = "Test page",
    script: str | None = "alert(1)",
    with_navigation: bool = True,
    tables: dict[int, list[list[str]]] | None = None,
) -> bytes:
    """A full HTML page: head with title/style, nav and footer furniture, main content, a script;
    `tables[i]` at the end of section i."""
    parts = ["<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>"]
    parts.append(f"<title>{html.escape(title)}</title>")
    parts.append("<style>body { font-family: sans-serif; } .hidden-style-text { color: red; }</style>")
    if script is not None:
        parts.append(f"<script>{script}</script>")
    parts.append("</head><body>")
    if with_navigation:
        parts.append("<nav><a href='/'>Home</a> <a href='/menu'>Site menu link</a></nav>")
    parts.append("<main>")
    for index, (heading, paragraphs) in enumerate(sections):
        parts.append(f"<h2>{html.escape(heading)}</h2>")
        parts.extend(f"<p>{html.escape(p)}</p>" for p in paragraphs)
        if tables and index in tables:
            parts.append(html_table(tables[index]))
    parts.append("<noscript>Please enable JavaScript</noscript>")
    if script is not None:
        parts.append(f"<script type='text/javascript'>{script}</script>")
    parts.append("</main>")
    if with_navigation:
        parts.append("<footer>Copyright footer text</footer>")
    parts.append("</body></html>")
    return "\n".join(parts).encode("utf-8")


def html_paragraphs(paragraphs: list[str]) -> str:
    """Each paragraph as an HTML <p>, escaped."""
    return "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)


def html_table(rows: list[list[str]]) -> str:
    """A table with a header row of <th> cells."""
    head = "".join(f"<th>{html.escape(str(cell))}</th>" for cell in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in row) + "</tr>" for row in rows[1:])
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def make_markdown(
    sections: list[tuple[str, list[str]]],
    *,
    title: str | None = "Test notes",
    code: str | None = None,
) -> bytes:
    """Markdown with an optional H1 title, `## heading` sections, and an optional fenced code block."""
    lines: list[str] = []
    if title:
        lines += [f"# {title}", ""]
    for heading, paragraphs in sections:
        lines += [f"## {heading}", ""]
        for paragraph in paragraphs:
            lines += [paragraph, ""]
    if code is not None:
        lines += ["```python", code, "```", ""]
    return "\n".join(lines).encode("utf-8")


def make_text(paragraphs: list[str], *, encoding: str = "utf-8") -> bytes:
    return "\n\n".join(paragraphs).encode(encoding)


def make_png(width: int = 4, height: int = 4) -> bytes:
    """A valid grey PNG image."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def make_exe() -> bytes:
    """The start of a Windows executable (MZ/PE headers and padding)."""
    header = bytearray(512)
    header[0:2] = b"MZ"
    header[0x3C:0x40] = struct.pack("<I", 0x80)
    header[0x80:0x84] = b"PE\0\0"
    return bytes(header)


def lorem_sentences(count: int, *, seed: int = 0) -> list[str]:
    """Deterministic, varied English sentences (with abbreviations and decimals) for size tests."""
    subjects = [
        "The finance team",
        "Dr. Smith",
        "Every employee",
        "The IT service desk",
        "Our auditors",
        "A new starter",
        "The travel policy",
        "Each manager",
        "The security office",
        "Payroll",
    ]
    verbs = ["reviews", "approves", "documents", "reports", "updates", "checks", "archives", "explains"]
    objects = [
        "expense claims above 250.00 EUR",
        "laptop requests, e.g. replacements and upgrades",
        "the quarterly budget forecast",
        "access rights for shared folders",
        "travel bookings made through the portal",
        "incidents affecting customer data",
        "holiday requests for the summer period",
        "invoices from approved suppliers",
    ]
    tails = [
        "before the end of each month",
        "within 3.5 working days",
        "as described in section 4.2",
        "unless the CFO grants an exception",
        "using the standard template",
        "and keeps a copy for seven years",
        "after consulting the line manager",
        "",
    ]
    sentences = []
    for i in range(count):
        n = i * 7 + seed * 13
        tail = tails[(n // 3) % len(tails)]
        text = f"{subjects[n % len(subjects)]} {verbs[(n // 2) % len(verbs)]} {objects[(n // 5) % len(objects)]}"
        sentences.append(f"{text} {tail}.".replace(" .", "."))
    return sentences
