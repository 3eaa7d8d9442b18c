"""Scanned PDFs: pages without a text layer are read by Debian's Tesseract (installed by `make
tesseract`); page numbers are kept, the parsed document names the OCR'd pages, a mixed PDF keeps
both, a corrupt scan fails with a sentence. Character accuracy and seconds per page are measured
on generated scans (known text rendered to an image-only PDF) and printed."""

from __future__ import annotations

import json
import time

import pytest

from ragchat.evaluation import docgen
from ragchat.services.errors import EmptyDocumentError
from ragchat.services.parsing import parse_document
from ragchat.services.parsing.ocr import ocr_unavailable_reason

pytestmark = pytest.mark.skipif(ocr_unavailable_reason() is not None, reason=str(ocr_unavailable_reason()))

PAGES = [
    "Supply contract 4711 between Brightwater Tools Ltd and Northwind Supplies.\n"
    "The supplier delivers 250 drill sets each month at 18.40 euros per set.\n"
    "Payment is due within 30 days of the invoice date; late payment costs 2 percent.",
    "Either party may end this contract with three months notice in writing.\n"
    "Disputes go to the courts of Leeds. Signed on 14 March 2026 by both parties.",
    "Annex A lists the drill models: BW-200, BW-350 and BW-500 Pro.\n"
    "Warranty covers parts and labour for 24 months from the delivery date.",
]


def character_accuracy(expected: str, got: str) -> float:
    """1 - (Levenshtein distance / length of the expected text), whitespace runs folded to one space."""
    a, b = " ".join(expected.split()), " ".join(got.split())
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return max(0.0, 1 - previous[-1] / max(1, len(a)))


def test_scanned_pdf_is_read_with_page_numbers_and_measured():
    data = docgen.make_image_pdf(PAGES)
    started = time.perf_counter()
    parsed = parse_document(data=data, filename="contract-scan.pdf")
    seconds = time.perf_counter() - started
    assert parsed.ocr_pages == [1, 2, 3] and parsed.pages == 3
    assert [b.page_number for b in parsed.blocks] == [1, 2, 3]
    assert any("read by text recognition (OCR)" in w for w in parsed.warnings)
    accuracies = [character_accuracy(text, block.text) for text, block in zip(PAGES, parsed.blocks, strict=True)]
    overall = character_accuracy("\n".join(PAGES), "\n".join(b.text for b in parsed.blocks))
    print(
        json.dumps(
            {
                "ocr_pages": len(PAGES),
                "char_accuracy": round(overall, 4),
                "per_page": [round(a, 4) for a in accuracies],
                "seconds_per_page": round(seconds / len(PAGES), 2),
            }
        )
    )
    assert overall >= 0.88, accuracies
    assert "250 drill sets" in parsed.text or "250 drill" in parsed.text


def test_mixed_pdf_keeps_text_pages_and_reads_scanned_ones():
    text_page = "This page has a real text layer: the price list is valid from 1 April 2026."
    data = docgen.make_image_pdf([PAGES[0], None, PAGES[2]], text_pages={1: text_page})
    parsed = parse_document(data=data, filename="mixed.pdf")
    assert parsed.ocr_pages == [1, 3]
    assert [b.page_number for b in parsed.blocks] == [1, 2, 3]
    assert parsed.blocks[1].text == text_page
    assert "Warranty" in parsed.blocks[2].text


def test_corrupt_scan_fails_with_a_sentence():
    with pytest.raises(EmptyDocumentError) as caught:
        parse_document(data=docgen.make_corrupt_scan_pdf(), filename="damaged-scan.pdf")
    message = str(caught.value)
    assert "text recognition (OCR)" in message and message.endswith(".")


def test_scanned_pdf_through_the_pipeline_records_ocr_pages(upload_scan):
    document = upload_scan(docgen.make_image_pdf(PAGES[:2]), "scan.pdf")
    assert document.status == "ready", document.error
    assert document.ocr_pages == [1, 2] and document.pages == 2


@pytest.fixture
def upload_scan(db, django_user_model, rag_runtime):
    from documents import services

    user = django_user_model.objects.create_superuser("root", "root@example.com", "pw-root-123")
    tag = services.tag_ensure_public(tenant_id="default")

    def _upload(data: bytes, filename: str):
        document = services.document_create(user=user, data=data, filename=filename, tags=[tag])
        services.document_ingest_sync(document.id)
        document.refresh_from_db()
        return document

    return _upload
