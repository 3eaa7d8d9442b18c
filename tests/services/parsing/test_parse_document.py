"""The entry point's own refusals (size, emptiness), and every refusal reads as a sentence."""

from __future__ import annotations

import pytest

from ragchat.evaluation import docgen
from ragchat.services.errors import (
    DocumentError,
    DocumentTooLargeError,
    EmptyDocumentError,
)
from ragchat.services.parsing import parse_document


def test_over_the_size_limit():
    with pytest.raises(DocumentTooLargeError, match=r"the limit is 1\.0 MB"):
        parse_document(data=b"a" * (1024 * 1024 + 1), filename="big.txt", max_bytes=1024 * 1024)


@pytest.mark.parametrize("data", [b"", b"   \n\t  "])
def test_empty_file(data):
    with pytest.raises(EmptyDocumentError, match="empty"):
        parse_document(data=data, filename="empty.txt")


def test_document_with_only_markup_is_empty():
    with pytest.raises(EmptyDocumentError, match="no readable text"):
        parse_document(data=b"<html><body><script>alert(1)</script></body></html>", filename="x.html")


def test_every_refusal_is_a_document_error_with_a_sentence():
    bad_inputs = [
        (b"", "a.txt"),
        (docgen.make_png(), "a.pdf"),
        (docgen.make_corrupt_pdf(), "a.pdf"),
        (docgen.make_pdf(["x"], encrypt_password="p"), "a.pdf"),
        (docgen.make_scanned_pdf(), "a.pdf"),
    ]
    for data, filename in bad_inputs:
        with pytest.raises(DocumentError) as caught:
            parse_document(data=data, filename=filename)
        message = str(caught.value)
        assert message[0].isupper() and message.endswith(".") and "Error" not in message
