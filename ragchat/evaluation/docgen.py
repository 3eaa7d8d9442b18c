"""Small, real documents generated in code: the evaluation corpus (corpus.py) and the tests use them.

Nothing binary is committed; every file is built at the moment it is needed with the same
libraries a user's tools would use (fpdf2 for PDF, python-docx for Word, pypdf to encrypt).
"""

from __future__ import annotations

import html
import io
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
) -> bytes:
    """A Word document: optional Title paragraph, then each (heading, paragraphs) section.

    `table`, when given, is added (rows of cell strings) at the end of the first section.
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
        if table and index == 0:
            grid = document.add_table(rows=len(table), cols=len(table[0]))
            for r, row in enumerate(table):
                for c, value in enumerate(row):
                    grid.cell(r, c).text = value
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def make_zip_bomb_docx(*, padding_bytes: int = 20 * 1024 * 1024) -> bytes:
    """A valid DOCX plus a member of zeros that deflates about 1000:1 (20 MB -> ~20 KB)."""
    base = make_docx([("Harmless", ["Nothing to see here."])])
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(base)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            target.writestr(item, source.read(item.filename))
        with target.open("word/media/padding.bin", "w") as member:
            block = b"\0" * (1024 * 1024)
            remaining = padding_bytes
            while remaining > 0:
                member.write(block[: min(remaining, len(block))])
                remaining -= len(block)
    return out.getvalue()


def make_html(
    sections: list[tuple[str, list[str]]],
    *,
    title: str = "Test page",
    script: str | None = "alert(1)",
    with_navigation: bool = True,
) -> bytes:
    """A full HTML page: head with title/style, nav and footer furniture, main content, a script."""
    parts = ["<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>"]
    parts.append(f"<title>{html.escape(title)}</title>")
    parts.append("<style>body { font-family: sans-serif; } .hidden-style-text { color: red; }</style>")
    if script is not None:
        parts.append(f"<script>{script}</script>")
    parts.append("</head><body>")
    if with_navigation:
        parts.append("<nav><a href='/'>Home</a> <a href='/menu'>Site menu link</a></nav>")
    parts.append("<main>")
    for heading, paragraphs in sections:
        parts.append(f"<h2>{html.escape(heading)}</h2>")
        parts.extend(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    parts.append("<noscript>Please enable JavaScript</noscript>")
    if script is not None:
        parts.append(f"<script type='text/javascript'>{script}</script>")
    parts.append("</main>")
    if with_navigation:
        parts.append("<footer>Copyright footer text</footer>")
    parts.append("</body></html>")
    return "\n".join(parts).encode("utf-8")


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
