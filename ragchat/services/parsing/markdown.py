"""Markdown: CommonMark with tables (markdown-it-py); sections from headings, title from front matter."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ragchat.services.parsing.base import MIME_TYPES, ParsedDocument, TextBlock
from ragchat.services.parsing.html import html_fragment_text
from ragchat.services.parsing.tables import table_blocks
from ragchat.services.parsing.textutil import clean_inline, clean_text, decode_text, filename_title

if TYPE_CHECKING:  # imported lazily at run time, like every parsing library
    from markdown_it.token import Token


FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)---[ \t]*\n", re.DOTALL)


def parse(*, data: bytes, filename: str, max_unpacked_bytes: int) -> ParsedDocument:
    from markdown_it import MarkdownIt

    text, warnings = decode_text(data)
    text = clean_text(text)
    front_title = ""
    match = FRONT_MATTER.match(text)
    if match:
        title_line = re.search(r"(?m)^title:\s*['\"]?(.+?)['\"]?\s*$", match.group(1))
        front_title = clean_inline(title_line.group(1)) if title_line else ""
        text = text[match.end() :]
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    blocks = _markdown_blocks(tokens)
    first_heading = next((b.text for b in blocks if b.is_heading), "")
    title = front_title or first_heading or filename_title(filename)
    return ParsedDocument(
        mime_type=MIME_TYPES["markdown"], kind="markdown", title=title, pages=None, blocks=blocks, warnings=warnings
    )


def _markdown_blocks(tokens: Sequence[Token]) -> list[TextBlock]:
    blocks: list[TextBlock] = []
    section: str | None = None
    in_heading = False
    in_table = False
    row: list[str] = []
    rows: list[list[str]] = []
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
            blocks.extend(table_blocks(rows, section=section, has_header=True))  # GFM tables always have one
            rows = []
        elif kind == "inline":
            text = clean_inline(_markdown_inline_text(token))
            if in_table and row:
                row[-1] = text
                continue
            if not text:
                continue
            if in_heading:
                section = text
                blocks.append(TextBlock(text=text, section=section, is_heading=True))
            else:
                blocks.append(TextBlock(text=text, section=section))
        elif kind in {"th_open", "td_open"}:
            row.append("")  # filled by the cell's inline token; an empty cell keeps the columns in line
        elif kind == "tr_close":
            rows.append(row)
            row = []
        elif kind in {"fence", "code_block"}:
            code = token.content.strip("\n")
            if code.strip():
                blocks.append(TextBlock(text=code, section=section))
        elif kind == "html_block":
            html_text = html_fragment_text(token.content)
            if html_text:
                blocks.append(TextBlock(text=html_text, section=section))
    return blocks


def _markdown_inline_text(token: Token) -> str:
    """The inline text a reader sees and searches for.

    Underscore "emphasis" around one word is kept literally: `__debug__`, `__init__.py` and
    `_private_` are identifiers far more often than emphasis, and a question naming them must find
    them (CommonMark would index bold "debug"). Other emphasis markup is dropped.
    """
    parts: list[str] = []
    children = list(token.children or [])
    i = 0
    while i < len(children):
        child = children[i]
        if child.type in {"em_open", "strong_open"} and _literal_underscores(children, i):
            parts.append(child.markup + children[i + 1].content + children[i + 2].markup)
            i += 3
            continue
        if child.type in {"text", "code_inline"}:
            parts.append(child.content)
        elif child.type in {"softbreak", "hardbreak"}:
            parts.append(" ")
        elif child.type == "image":
            parts.append(child.content)  # alt text
        # html_inline: raw HTML tags are markup, not text; emphasis markers: markup too
        i += 1
    return "".join(parts)


_ONE_WORD = re.compile(r"[\w.\-]+")


def _literal_underscores(children: Sequence[Token], i: int) -> bool:
    """children[i] opens underscore emphasis around a single word that closes right after it."""
    if i + 2 >= len(children) or "_" not in children[i].markup:
        return False
    inner, close = children[i + 1], children[i + 2]
    return (
        inner.type == "text"
        and close.type in {"em_close", "strong_close"}
        and close.markup == children[i].markup
        and _ONE_WORD.fullmatch(inner.content) is not None
    )
