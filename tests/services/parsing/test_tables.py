"""Tables stay tables: every format renders a row as one line whose cells carry their column's
header, and the chunker keeps rows whole, so no chunk holds a row without its header."""

from __future__ import annotations

import pytest

from ragchat.evaluation import docgen
from ragchat.services.chunking import chunk_document
from ragchat.services.parsing import parse_document
from ragchat.services.parsing.tables import looks_like_header, table_blocks

MATRIX = [["Amount", "Approval"], ["Up to 5,000 GBP", "Line manager"], ["Above 5,000 GBP", "Finance director"]]
LABELLED = ["Amount: Up to 5,000 GBP | Approval: Line manager", "Amount: Above 5,000 GBP | Approval: Finance director"]


@pytest.fixture(scope="module")
def count_tokens(tokenizer):
    """Word pieces as the embedder sees them, [CLS] and [SEP] included."""
    return lambda text: len(tokenizer.encode(text))


def test_a_first_row_of_names_is_a_header_a_key_value_row_is_not():
    assert looks_like_header(["Amount", "Approval"])
    assert not looks_like_header(["Annual leave", "28 days"])
    assert not looks_like_header(["Name", ""])
    assert [b.text for b in table_blocks([["Annual leave", "28 days"], ["Sick leave", "10 days"]])] == [
        "Annual leave | 28 days",
        "Sick leave | 10 days",
    ]


def test_docx_table_rows_carry_their_header():
    data = docgen.make_docx([("Purchasing", ["Approvals depend on the amount."])], table=MATRIX)
    parsed = parse_document(data=data, filename="p.docx")
    rows = [b for b in parsed.blocks if b.is_row]
    assert [b.text for b in rows] == LABELLED
    assert {b.section for b in rows} == {"Purchasing"}


@pytest.mark.parametrize(
    "markup",
    [
        "<table><tr><th>Amount</th><th>Approval</th></tr>{rows}</table>",
        "<table><thead><tr><td>Amount</td><td>Approval</td></tr></thead><tbody>{rows}</tbody></table>",
        "<table><tr><td>Amount</td><td>Approval</td></tr>{rows}</table>",  # judged from the first row
    ],
)
def test_html_table_rows_carry_their_header(markup):
    rows = "".join(f"<tr><td>{a}</td><td>{b}</td></tr>" for a, b in MATRIX[1:])
    page = f"<html><body><h2>Approvals</h2>{markup.format(rows=rows)}<p>After the table.</p></body></html>"
    parsed = parse_document(data=page.encode(), filename="a.html")
    assert [b.text for b in parsed.blocks] == ["Approvals", *LABELLED, "After the table."]


def test_html_nested_table_is_read_once():
    page = (
        "<html><body><table><tr><th>Team</th><th>Contacts</th></tr><tr><td>IT</td>"
        "<td><table><tr><td>Helpdesk</td><td>4357</td></tr></table></td></tr></table></body></html>"
    )
    parsed = parse_document(data=page.encode(), filename="n.html")
    assert [b.text for b in parsed.blocks] == ["Team: IT | Contacts: Helpdesk 4357"]


def test_markdown_table_with_an_empty_cell_keeps_its_columns():
    data = b"# Prices\n\n| Item | Colour | Price |\n|---|---|---|\n| Stapler | | 12 GBP |\n"
    parsed = parse_document(data=data, filename="p.md")
    assert [b.text for b in parsed.blocks if b.is_row] == ["Item: Stapler | Price: 12 GBP"]


def test_a_long_table_is_chunked_by_whole_rows_each_with_its_header(count_tokens):
    rows = [
        ["Item", "Price", "Approval"],
        *[[f"Item {i:03d}", f"{i * 10} GBP", f"Approver {i % 7}"] for i in range(300)],
    ]
    data = docgen.make_xlsx({"Prices": rows})
    parsed = parse_document(data=data, filename="prices.xlsx")
    chunks = chunk_document(parsed=parsed, chunk_size=128, overlap=16, count_tokens=count_tokens)
    expected = [f"Item: Item {i:03d} | Price: {i * 10} GBP | Approval: Approver {i % 7}" for i in range(300)]
    seen = []
    for chunk in chunks:
        assert chunk.token_count <= 128
        assert chunk.section == "Prices"
        lines = chunk.text.split("\n")
        assert all(line in expected for line in lines if line != "Prices"), chunk.text  # whole rows only
        seen += lines
    assert set(expected) <= set(seen)
    assert len(chunks) > 10
    # the overlap is whole rows: a chunk opens with the last row of the one before
    assert chunks[2].text.split("\n")[0] == chunks[1].text.split("\n")[-1]


def test_slides_each_open_their_own_chunk_with_the_slide_number_as_page(count_tokens):
    data = docgen.make_pptx(
        [("Agenda", ["Budget review."]), ("Agenda", ["Hiring plan."]), ("Approvals", [])], tables={2: MATRIX}
    )
    parsed = parse_document(data=data, filename="deck.pptx")
    chunks = chunk_document(parsed=parsed, chunk_size=128, overlap=16, count_tokens=count_tokens)
    assert [(c.page_number, c.section, c.text) for c in chunks] == [
        (1, "Agenda", "Agenda\nBudget review."),
        (2, "Agenda", "Agenda\nHiring plan."),
        (3, "Approvals", "Approvals\n" + "\n".join(LABELLED)),
    ]
