"""HTML: visible text in reading order, sections from h1-h6 (BeautifulSoup with lxml).

Scripts, styles, forms and site furniture (nav, aside, footer, the site header) are dropped with
their content; nothing is executed or rendered.
"""

from __future__ import annotations

from typing import Any

from ragchat.services.parsing.base import MIME_TYPES, ParsedDocument, TextBlock
from ragchat.services.parsing.tables import table_blocks
from ragchat.services.parsing.textutil import clean_inline, filename_title

# Dropped with their content: executable, invisible or site furniture.
HTML_DROP = [
    "script",
    "style",
    "noscript",
    "template",
    "iframe",
    "object",
    "embed",
    "svg",
    "canvas",
    "nav",
    "aside",
    "footer",
    "form",
    "button",
    "select",
    "head",
    "link",
    "meta",
]
HTML_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
HTML_BLOCKS = {
    "p",
    "div",
    "li",
    "ul",
    "ol",
    "pre",
    "blockquote",
    "table",
    "thead",
    "tbody",
    "tr",
    "section",
    "article",
    "main",
    "dl",
    "dt",
    "dd",
    "figure",
    "figcaption",
    "address",
    "details",
    "summary",
    "header",
    "body",
    "caption",
    "hr",
}


def parse(*, data: bytes, filename: str, max_unpacked_bytes: int) -> ParsedDocument:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(data, "lxml")  # bytes: lets it honour <meta charset>
    title_tag = soup.find("title")
    head_title = clean_inline(title_tag.get_text(" ")) if title_tag else ""
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
    title = head_title or first_heading or filename_title(filename)
    return ParsedDocument(
        mime_type=MIME_TYPES["html"], kind="html", title=title, pages=None, blocks=blocks, warnings=[]
    )


class _HtmlWalker:
    """Walk the tree in order; block elements end a text block, headings start a section."""

    def __init__(self) -> None:
        self.blocks: list[TextBlock] = []
        self.buffer: list[str] = []
        self.section: str | None = None

    def run(self, root: Any) -> list[TextBlock]:
        self._walk(root)
        self._flush()
        return self.blocks

    def _walk(self, node: Any) -> None:
        from bs4 import NavigableString, Tag

        for child in node.children:
            if isinstance(child, Tag):
                self._tag(child)
            elif type(child) is NavigableString:  # skips comments, CDATA, doctype, processing instructions
                self.buffer.append(str(child))

    def _tag(self, tag: Any) -> None:
        name = (tag.name or "").lower()
        if name in HTML_HEADINGS:
            self._flush()
            text = clean_inline(tag.get_text(" "))
            if text:
                self.section = text
                self.blocks.append(TextBlock(text=text, section=text, is_heading=True))
        elif name == "table":
            self._flush()
            self.blocks.extend(_html_table_blocks(tag, self.section))
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
        text = clean_inline("".join(self.buffer)).strip(" |")
        self.buffer = []
        if text:
            self.blocks.append(TextBlock(text=text, section=self.section))


def _html_table_blocks(table: Any, section: str | None) -> list[TextBlock]:
    """Rows of this table (not of tables nested in its cells); a first row of <th> cells, or one
    inside <thead>, is the header."""
    rows: list[list[str]] = []
    first_is_header = False
    for tr in table.find_all("tr"):
        if tr.find_parent("table") is not table:
            continue
        cells = [cell for cell in tr.find_all(["td", "th"]) if cell.find_parent("tr") is tr]
        if not cells:
            continue
        if not rows:
            first_is_header = tr.find_parent("thead") is not None or all(cell.name == "th" for cell in cells)
        rows.append([clean_inline(cell.get_text(" ")) for cell in cells])
    return table_blocks(rows, section=section, has_header=True if first_is_header else None)


def html_fragment_text(fragment: str) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(fragment, "lxml")
    for tag in soup.find_all(HTML_DROP):
        tag.decompose()
    return clean_inline(soup.get_text(" "))
