"""HTML: main text and headings, without scripts, styles or site furniture."""

from __future__ import annotations

from ragchat.evaluation import docgen
from ragchat.services.parsing import parse_document


def test_html_main_text_and_headings_without_script_style_or_navigation():
    data = docgen.make_html(
        [("Opening hours", ["The office opens at 8:00."]), ("Parking", ["Use level -2 of the garage."])],
        title="Office Guide",
        script="alert(1)",
    )
    parsed = parse_document(data=data, filename="guide.html")
    assert parsed.kind == "html"
    assert parsed.title == "Office Guide"
    assert [(b.text, b.section) for b in parsed.blocks] == [
        ("Opening hours", "Opening hours"),
        ("The office opens at 8:00.", "Opening hours"),
        ("Parking", "Parking"),
        ("Use level -2 of the garage.", "Parking"),
    ]
    everything = parsed.text
    for hidden in (
        "alert(1)",
        "font-family",
        "hidden-style-text",
        "enable JavaScript",
        "Site menu link",
        "Copyright footer",
    ):
        assert hidden not in everything


def test_html_without_main_uses_body_and_drops_inline_handlers_text():
    page = (
        b'<html><body><h1>Notice</h1><p onclick="steal()">Fire drill on <b>Friday</b>.</p>'
        b"<script>document.write('injected')</script><template><p>template text</p></template>"
        b"<!-- secret comment --><table><tr><td>Room</td><td>B12</td></tr></table></body></html>"
    )
    parsed = parse_document(data=page, filename="notice.txt")  # extension lies; content is HTML
    assert parsed.kind == "html"
    assert [b.text for b in parsed.blocks] == ["Notice", "Fire drill on Friday.", "Room | B12"]
    assert "injected" not in parsed.text and "template text" not in parsed.text
    assert "secret comment" not in parsed.text and "steal" not in parsed.text
