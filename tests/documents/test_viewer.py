"""The document viewer through the real parser, chunker, hashing embedder and embedded Qdrant: the
cited chunk is marked among its neighbours, Markdown is rendered, a PDF page is served as an image
with the passage found on it (text layer and OCR), the chunks as indexed only for those who manage
the document, bad input a sentence. Access for every role: tests/access/test_matrix.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from documents import services
from ragchat.evaluation.docgen import lorem_sentences, make_image_pdf, make_markdown, make_pdf
from ragchat.markup import snippet_html
from ragchat.services.parsing.ocr import ocr_unavailable_reason

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _boxes(html: str) -> list[list[float]]:
    found = re.search(r'data-boxes="([^"]*)"', html)
    assert found, "no page figure"
    return [[float(v) for v in box.split(",")] for box in found.group(1).split(";") if box]


def test_markdown_document_opens_at_the_cited_chunk_rendered(upload, people):
    sections = [(f"Part {n}", [" ".join(lorem_sentences(12, seed=n))]) for n in range(6)]
    sections[3] = ("Travel rules", ["Trains are booked in **second class**; flights need the *manager's* approval."])
    document = upload(make_markdown(sections, title="Handbook"), "handbook.md")
    client = _client(people["member"])
    html = client.get(f"/documents/{document.pk}/view", {"chunk": 3}).content.decode()
    cited = re.search(r'<div class="viewer-chunk is-cited" data-chunk="(\d+)" id="passage"', html)
    assert cited and cited.group(1) == "3"
    assert html.count('class="viewer-chunk') >= 5  # its neighbours above and below
    assert '<h2 class="viewer-section">Travel rules</h2>' in html  # the sections as headings
    assert "**" not in html and "## " not in html  # rendered, not raw Markdown
    assert "<mark>" in html


def test_the_chunks_as_indexed_are_shown_only_to_who_manages_the_document(upload, people):
    document = upload(make_markdown([("Leave", ["Five days carry over until March 31."])]), "leave.md")
    url = f"/documents/{document.pk}/view"
    owner = _client(people["owner"]).get(url, {"show": "chunks", "chunk": 0}).content.decode()
    assert "Chunks as indexed" in owner and f"{document.pk}:0" in owner and 'class="indexed-text"' in owner
    member = _client(people["member"]).get(url, {"show": "chunks", "chunk": 0}).content.decode()
    assert "Chunks as indexed" not in member and 'class="indexed-text"' not in member
    assert 'id="passage"' in member  # the reader gets the document's text instead


def test_bad_input_gets_a_sentence(upload, people):
    document = upload(make_markdown([("Leave", ["Five days carry over."])]), "short.md")
    client = _client(people["member"])
    bad = client.get(f"/documents/{document.pk}/view", {"chunk": "x1"})
    assert bad.status_code == 400 and "whole number" in bad.content.decode()
    gone = client.get(f"/documents/{document.pk}/view", {"chunk": 99})
    assert gone.status_code == 200 and "not in the current version" in gone.content.decode()
    assert client.get(f"/documents/{document.pk}/pages/1.png").status_code == 404  # not a PDF


def test_pdf_page_is_served_with_the_passage_found_on_it(upload, people):
    pages = [" ".join(lorem_sentences(40, seed=s)) for s in range(3)]
    document = upload(make_pdf(pages, title="Budget"), "budget.pdf")
    client = _client(people["member"])
    html = client.get(f"/documents/{document.pk}/view", {"chunk": 0}).content.decode()
    boxes = _boxes(html)
    assert boxes and all(0 <= v <= 1 for box in boxes for v in box)
    assert 'rel="next"' in html and "Page 1 of" in html
    image = client.get(f"/documents/{document.pk}/pages/1.png")
    assert image.status_code == 200 and image["Content-Type"] == "image/png" and image.content[:4] == b"\x89PNG"
    assert client.get(f"/documents/{document.pk}/pages/9.png").status_code == 404
    assert client.get(f"/documents/{document.pk}/view", {"page": 9}).status_code == 404
    cached = Path(settings.MEDIA_ROOT) / "viewer-cache" / "default" / str(document.pk)
    assert (cached / "v1" / "page-1.png").exists() and (cached / "v1" / "words-1.json").exists()
    services.document_delete(document=document, actor=people["owner"])
    assert not cached.exists()  # the images and word boxes go with the document


@pytest.mark.skipif(ocr_unavailable_reason() is not None, reason=str(ocr_unavailable_reason()))
def test_scanned_pdf_passage_is_found_by_its_word_boxes(upload, people):
    text = (
        "Supply contract 4711 between Brightwater Tools Ltd and Northwind Supplies.\n"
        "The supplier delivers 250 drill sets each month at 18.40 euros per set."
    )
    document = upload(make_image_pdf([text]), "scan.pdf")
    assert document.ocr_pages == [1]
    html = _client(people["member"]).get(f"/documents/{document.pk}/view", {"chunk": 0}).content.decode()
    boxes = _boxes(html)
    assert len(boxes) >= 2  # both lines of the scan
    assert "text recognition" in html


def test_snippets_of_markdown_show_as_text():
    assert snippet_html(
        "## Travel\n\nTrains in **second class**."
    ) == "Travel\nTrains in <strong>second class</strong>.".replace("\n", " ")
    assert snippet_html("Plain <b>text</b> 3 * 4") == "Plain &lt;b&gt;text&lt;/b&gt; 3 * 4"
