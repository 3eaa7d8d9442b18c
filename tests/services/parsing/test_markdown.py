"""Markdown: heading sections, code blocks, and inline HTML that is not text."""

from __future__ import annotations

from ragchat.evaluation import docgen
from ragchat.services.parsing import parse_document


def test_markdown_headings_sections_and_code_blocks_kept():
    data = docgen.make_markdown(
        [
            ("Setup", ["Install the **VPN** client from [the portal](https://intranet/vpn)."]),
            ("Usage", ["Connect daily."]),
        ],
        title="VPN Guide",
        code="vpn connect --profile office",
    )
    parsed = parse_document(data=data, filename="vpn.md")
    assert parsed.kind == "markdown"
    assert parsed.mime_type == "text/markdown"
    assert parsed.title == "VPN Guide"
    sections = {b.text: b.section for b in parsed.blocks}
    assert sections["Install the VPN client from the portal."] == "Setup"
    assert sections["Connect daily."] == "Usage"
    assert sections["vpn connect --profile office"] == "Usage"


def test_markdown_inline_script_is_not_text():
    data = b"# Notes\n\nSafe text.\n\n<script>alert(1)</script>\n\nMore <span>text</span> here.\n"
    parsed = parse_document(data=data, filename="notes.md")
    assert "alert(1)" not in parsed.text
    assert "More text here." in [b.text for b in parsed.blocks]


def test_markdown_keeps_identifiers_written_with_underscores():
    """Issue 16: `__debug__` is an identifier, not bold "debug"; a question naming it must find it."""
    data = (
        b"# Flags\n\nSet __debug__ to False, edit __init__.py and call _private_ once.\n\n"
        b"Real emphasis stays plain: **bold**, _really important_ and *star*.\n\n"
        b"| flag | meaning |\n|---|---|\n| __slots__ | no dict |\n"
    )
    parsed = parse_document(data=data, filename="flags.md")
    texts = [b.text for b in parsed.blocks]
    assert "Set __debug__ to False, edit __init__.py and call _private_ once." in texts
    assert "Real emphasis stays plain: bold, really important and star." in texts
    assert "flag: __slots__ | meaning: no dict" in texts
