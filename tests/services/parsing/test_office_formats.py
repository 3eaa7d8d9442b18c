"""PowerPoint, Excel, CSV, OpenDocument, RTF and saved emails: each built by the test with the
library a user's tools would use, detected from its bytes and read into sections, pages and rows."""

from __future__ import annotations

import pytest

from ragchat.evaluation import docgen
from ragchat.services.parsing import detect_kind, parse_document

MATRIX = [["Amount", "Approval"], ["Up to 5,000 GBP", "Line manager"], ["Above 5,000 GBP", "Finance director"]]


def _blocks(parsed):
    return [(b.text, b.section, b.page_number) for b in parsed.blocks]


def test_pptx_one_section_per_slide_with_tables_and_speaker_notes():
    data = docgen.make_pptx(
        [("Kick-off", ["Welcome to the project.", "Budget is 40,000 GBP."]), ("Approval matrix", [])],
        title="Project deck",
        tables={1: MATRIX},
        notes={0: "Remind everyone of the deadline on 14 March."},
    )
    parsed = parse_document(data=data, filename="deck.bin")  # the name does not matter
    assert (parsed.kind, parsed.title, parsed.pages) == ("pptx", "Project deck", 2)
    assert _blocks(parsed) == [
        ("Kick-off", "Kick-off", 1),
        ("Welcome to the project.", "Kick-off", 1),
        ("Budget is 40,000 GBP.", "Kick-off", 1),
        ("Speaker notes: Remind everyone of the deadline on 14 March.", "Kick-off", 1),
        ("Approval matrix", "Approval matrix", 2),
        ("Amount: Up to 5,000 GBP | Approval: Line manager", "Approval matrix", 2),
        ("Amount: Above 5,000 GBP | Approval: Finance director", "Approval matrix", 2),
    ]
    assert [b.is_row for b in parsed.blocks][-2:] == [True, True]


def test_pptx_slide_without_title_is_named_by_its_number():
    data = docgen.make_pptx([("", ["Only a text box here."])])
    parsed = parse_document(data=data, filename="untitled.pptx")
    assert _blocks(parsed)[:2] == [("Slide 1", "Slide 1", 1), ("Only a text box here.", "Slide 1", 1)]
    assert parsed.title == "untitled"


def test_xlsx_each_sheet_a_section_rows_labelled_formulas_as_saved_values():
    data = docgen.make_xlsx(
        {
            "Prices": [
                ["Price list 2025"],
                [],
                ["Item", "Price", "Unit"],
                ["Stapler", 12, "GBP"],
                ["Desk", 240.5, "GBP"],
            ],
            "Totals": [["Cost centre", "Amount"], ["CC-1", 100], ["CC-2", 250], ["Total", None]],
        },
        title="Office supplies",
        formulas={("Totals", "B4"): ("=B2+B3", 350)},
    )
    parsed = parse_document(data=data, filename="supplies.xlsx")
    assert (parsed.kind, parsed.title) == ("xlsx", "Office supplies")
    assert _blocks(parsed) == [
        ("Prices", "Prices", None),
        ("Price list 2025", "Prices", None),
        ("Item: Stapler | Price: 12 | Unit: GBP", "Prices", None),
        ("Item: Desk | Price: 240.5 | Unit: GBP", "Prices", None),
        ("Totals", "Totals", None),
        ("Cost centre: CC-1 | Amount: 100", "Totals", None),
        ("Cost centre: CC-2 | Amount: 250", "Totals", None),
        ("Cost centre: Total | Amount: 350", "Totals", None),
    ]


@pytest.mark.parametrize("delimiter", [",", ";", "\t"])
def test_csv_rows_carry_their_header(delimiter):
    data = docgen.make_csv([["Item", "Price"], ["Stapler", "12 GBP"], ["Desk, oak", "240 GBP"]], delimiter=delimiter)
    assert detect_kind(data=data, filename="prices.csv") == "csv"
    parsed = parse_document(data=data, filename="prices.csv")
    assert [b.text for b in parsed.blocks if b.is_row] == [
        "Item: Stapler | Price: 12 GBP",
        "Item: Desk, oak | Price: 240 GBP",
    ]


def test_a_csv_name_on_prose_stays_text():
    data = b"Meeting notes\n\nWe agreed on the budget. Nothing else happened.\n"
    assert detect_kind(data=data, filename="notes.csv") == "text"


def test_odt_headings_paragraphs_and_tables():
    data = docgen.make_odt([("Approvals", ["Every purchase needs approval."])], title="Purchasing rules", table=MATRIX)
    parsed = parse_document(data=data, filename="rules.odt")
    assert (parsed.kind, parsed.title) == ("odt", "Purchasing rules")
    assert _blocks(parsed) == [
        ("Approvals", "Approvals", None),
        ("Every purchase needs approval.", "Approvals", None),
        ("Amount: Up to 5,000 GBP | Approval: Line manager", "Approvals", None),
        ("Amount: Above 5,000 GBP | Approval: Finance director", "Approvals", None),
    ]


def test_ods_sheets_and_odp_slides():
    ods = parse_document(data=docgen.make_ods({"Prices": [["Item", "Price"], ["Stapler", 12]]}), filename="p.ods")
    assert ods.kind == "ods"
    assert [b.text for b in ods.blocks] == ["Prices", "Item: Stapler | Price: 12"]
    odp = parse_document(
        data=docgen.make_odp(
            [("Kick-off", ["Welcome."]), ("Matrix", [])], tables={1: MATRIX}, notes={0: "Say hello to the board."}
        ),
        filename="deck.odp",
    )
    assert (odp.kind, odp.pages) == ("odp", 2)
    assert _blocks(odp) == [
        ("Kick-off", "Kick-off", 1),
        ("Welcome.", "Kick-off", 1),
        ("Speaker notes: Say hello to the board.", "Kick-off", 1),
        ("Matrix", "Matrix", 2),
        ("Amount: Up to 5,000 GBP | Approval: Line manager", "Matrix", 2),
        ("Amount: Above 5,000 GBP | Approval: Finance director", "Matrix", 2),
    ]


def test_rtf_paragraphs_and_escaped_characters():
    data = docgen.make_rtf(["Travel rules", "Hotels up to 180 GBP per night in Bergen.", "Crème brûlée {braces}"])
    parsed = parse_document(data=data, filename="travel.txt")
    assert (parsed.kind, parsed.title) == ("rtf", "Travel rules")
    assert [b.text for b in parsed.blocks] == [
        "Travel rules",
        "Hotels up to 180 GBP per night in Bergen.",
        "Crème brûlée {braces}",
    ]


def test_eml_header_html_body_cleaned_as_a_page_and_attachments_handed_back():
    table = "".join(f"<tr><td>{a}</td><td>{b}</td></tr>" for a, b in MATRIX[1:])
    data = docgen.make_eml(
        subject="New approval limits",
        body="Hi all, the new limits are in the table.",
        html_body=(
            "<html><head><style>p{color:red}</style><script>alert(1)</script></head><body>"
            "<p>Hi all, the new limits are in the table.</p>"
            f"<table><thead><tr><th>Amount</th><th>Approval</th></tr></thead>{table}</table>"
            "<img src='https://tracker.example.com/pixel.gif'></body></html>"
        ),
        attachments=[("prices.csv", docgen.make_csv([["Item", "Price"], ["Stapler", "12 GBP"]]))],
    )
    assert detect_kind(data=data, filename="mail.txt") == "eml"
    parsed = parse_document(data=data, filename="mail.eml")
    assert (parsed.kind, parsed.title) == ("eml", "New approval limits")
    assert [b.text for b in parsed.blocks] == [
        "Subject: New approval limits\nFrom: Ola Nordmann <ola@example.com>\nTo: team@example.com\n"
        "Date: Mon, 03 Mar 2025 09:15:00 +0100",
        "Hi all, the new limits are in the table.",
        "Amount: Up to 5,000 GBP | Approval: Line manager",
        "Amount: Above 5,000 GBP | Approval: Finance director",
    ]
    assert {b.section for b in parsed.blocks} == {"New approval limits"}
    assert [(a.filename, a.data) for a in parsed.attachments] == [("prices.csv", b"Item,Price\nStapler,12 GBP\n")]


def test_plain_text_that_starts_like_a_header_is_not_an_email():
    assert detect_kind(data=b"Subject: notes from Monday\n\nWe met.", filename="notes.txt") == "text"
    assert detect_kind(data=b"Note: remember\nTodo: buy milk\n", filename="notes.txt") == "text"
