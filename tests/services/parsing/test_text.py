"""Plain text: paragraphs, titles, and encodings other than UTF-8."""

from __future__ import annotations

from ragchat.evaluation import docgen
from ragchat.services.parsing import parse_document


def test_plain_text_paragraphs_and_title():
    data = docgen.make_text(["Canteen rules", "Lunch is served from 12:00 to 14:00.", "Bring your badge."])
    parsed = parse_document(data=data, filename="canteen.txt")
    assert parsed.kind == "text"
    assert parsed.title == "Canteen rules"
    assert [b.text for b in parsed.blocks] == [
        "Canteen rules",
        "Lunch is served from 12:00 to 14:00.",
        "Bring your badge.",
    ]
    assert parsed.warnings == []
    assert all(b.page_number is None and b.section is None for b in parsed.blocks)


def test_non_utf8_text_is_decoded_with_a_warning():
    data = docgen.make_text(["Café menu", "Crème brûlée costs 5 €."], encoding="cp1252")
    parsed = parse_document(data=data, filename="menu.txt")
    assert [b.text for b in parsed.blocks] == ["Café menu", "Crème brûlée costs 5 €."]
    assert len(parsed.warnings) == 1 and "not UTF-8" in parsed.warnings[0]


def test_utf16_text_with_bom_is_text_not_binary():
    data = "Quarterly report\n\nRevenue grew.".encode("utf-16")
    parsed = parse_document(data=data, filename="report.txt")
    assert [b.text for b in parsed.blocks] == ["Quarterly report", "Revenue grew."]
