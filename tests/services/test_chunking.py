"""Chunking: sentence- and token-aware, sections kept, and axiom A6 of docs/specs/rag-standard-v1.md on
real generated documents with the real MiniLM tokenizer (R-DOC-2).

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

import pytest

from ragchat.evaluation import docgen
from ragchat.services.chunking import Chunk, chunk_document, split_sentences
from ragchat.services.config import RAGSettings
from ragchat.services.parsing import ParsedDocument, TextBlock, parse_document

OVERLAP_TOLERANCE = 20  # A6: overlap within +-20 tokens of the setting


@pytest.fixture(scope="module")
def count_tokens(tokenizer):
    """Word pieces as the embedder sees them, without [CLS]/[SEP]."""
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False))


def words(text: str) -> str:
    return " ".join(text.split())


def shared_overlap(previous: str, following: str) -> str:
    """The longest tail of `previous`, starting at a word, that `following` starts with."""
    previous, following = words(previous), words(following)
    for start in range(len(previous)):
        if (start == 0 or previous[start - 1] == " ") and following.startswith(previous[start:]):
            return previous[start:]
    return ""


def starts_on(page_text: str, chunk_text: str) -> bool:
    """The chunk's opening words are on this page (or run from its last words onto the next)."""
    opening = words(chunk_text)[:40]
    return opening in page_text or any(page_text.endswith(opening[:k]) for k in range(8, len(opening)))


def assert_a6(chunks: list[Chunk], *, chunk_size: int, overlap: int, count_tokens) -> list[int]:
    """Axiom A6, checked with the tokenizer itself; returns the measured overlaps."""
    assert chunks
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert count_tokens(chunk.text) <= chunk_size, (chunk.chunk_index, count_tokens(chunk.text))
        assert chunk.token_count == count_tokens(chunk.text)
    overlaps = []
    for previous, following in zip(chunks, chunks[1:]):
        if previous.section != following.section:
            continue
        measured = count_tokens(shared_overlap(previous.text, following.text))
        assert abs(measured - overlap) <= OVERLAP_TOLERANCE, (previous.chunk_index, measured)
        overlaps.append(measured)
    return overlaps


def long_pdf(pages: int = 12, per_page: int = 22) -> ParsedDocument:
    sentences = docgen.lorem_sentences(pages * per_page)
    texts = [" ".join(sentences[i * per_page : (i + 1) * per_page]) for i in range(pages)]
    sections = ["Part One"] + [None] * (pages // 2 - 1) + ["Part Two"] + [None] * (pages - pages // 2 - 1)
    return parse_document(data=docgen.make_pdf(texts, sections=sections, title="Finance Manual"), filename="manual.pdf")


def long_docx(section_count: int = 8) -> tuple[ParsedDocument, list[tuple[str, list[str]]]]:
    sections = []
    for index in range(section_count):
        sentences = docgen.lorem_sentences(36, seed=index)
        paragraphs = [" ".join(sentences[i : i + 6]) for i in range(0, 36, 6)]
        sections.append((f"Chapter {index + 1}: Policy area {index + 1}", paragraphs))
    return parse_document(data=docgen.make_docx(sections), filename="handbook.docx"), sections


# --------------------------------------------------------------------------------------------
# Axiom A6 on real documents
# --------------------------------------------------------------------------------------------


def test_default_sizes_come_from_the_embedder_window():
    settings = RAGSettings()
    assert settings.effective_chunk_size == 204
    assert settings.chunk_overlap_tokens == 32


def test_a6_on_a_multi_page_pdf_with_default_sizes(count_tokens):
    settings = RAGSettings()
    parsed = long_pdf()
    chunks = chunk_document(
        parsed=parsed,
        chunk_size=settings.effective_chunk_size,
        overlap=settings.chunk_overlap_tokens,
        count_tokens=count_tokens,
    )
    overlaps = assert_a6(chunks, chunk_size=204, overlap=32, count_tokens=count_tokens)
    assert len(chunks) > 20 and len(overlaps) >= len(chunks) - 2
    # chunks are well filled, not cut short
    assert sum(c.token_count for c in chunks[:-1]) / (len(chunks) - 1) > 204 * 0.85
    # page numbers: the page where the chunk starts, in order, covering the document
    pages = [c.page_number for c in chunks]
    assert pages == sorted(pages) and pages[0] == 1 and pages[-1] == parsed.pages
    page_text = {b.page_number: words(b.text) for b in parsed.blocks}
    for chunk in chunks:
        assert starts_on(page_text[chunk.page_number], chunk.text), chunk.chunk_index


def test_pdf_chunks_keep_outline_sections_and_start_a_new_chunk_at_a_new_section(count_tokens):
    parsed = long_pdf()
    chunks = chunk_document(parsed=parsed, chunk_size=204, overlap=32, count_tokens=count_tokens)
    assert {c.section for c in chunks} == {"Part One", "Part Two"}
    first_of_part_two = next(c for c in chunks if c.section == "Part Two")
    assert first_of_part_two.page_number == parsed.pages // 2 + 1
    assert words(first_of_part_two.text).startswith(words(parsed.blocks[parsed.pages // 2].text)[:60])


@pytest.mark.parametrize(("chunk_size", "overlap"), [(204, 32), (128, 16), (512, 64), (1200, 150)])
def test_a6_on_a_long_docx_never_crossing_sections(count_tokens, chunk_size, overlap):
    parsed, sections = long_docx(section_count=8 if chunk_size < 1000 else 24)
    chunks = chunk_document(parsed=parsed, chunk_size=chunk_size, overlap=overlap, count_tokens=count_tokens)
    assert_a6(chunks, chunk_size=chunk_size, overlap=overlap, count_tokens=count_tokens)
    full_text = {heading: words(heading + " " + " ".join(paragraphs)) for heading, paragraphs in sections}
    for chunk in chunks:
        assert words(chunk.text) in full_text[chunk.section]  # from one section, in order
    for heading, _ in sections:
        opening = next(c for c in chunks if c.section == heading)
        assert opening.text.startswith(heading + "\n")
    # nothing is lost: every sentence of the document is inside some chunk
    for _, paragraphs in sections:
        for sentence in split_sentences(" ".join(paragraphs)):
            assert any(sentence in words(c.text) for c in chunks), sentence


def test_a6_holds_when_count_tokens_includes_special_tokens(tokenizer):
    with_specials = lambda text: len(tokenizer.encode(text))  # [CLS] ... [SEP]
    parsed, _ = long_docx(section_count=3)
    chunks = chunk_document(parsed=parsed, chunk_size=204, overlap=32, count_tokens=with_specials)
    assert max(with_specials(c.text) for c in chunks) <= 204
    assert max(with_specials(c.text) for c in chunks) >= 190


# --------------------------------------------------------------------------------------------
# Long sentences and unsplittable tokens
# --------------------------------------------------------------------------------------------


def test_a_sentence_longer_than_a_chunk_is_split_on_word_boundaries(count_tokens):
    source_words = [f"item{n}" for n in range(1500)]
    parsed = ParsedDocument(
        mime_type="text/plain",
        kind="text",
        title="List",
        pages=None,
        blocks=[TextBlock(text=" ".join(source_words))],
    )
    chunks = chunk_document(parsed=parsed, chunk_size=204, overlap=32, count_tokens=count_tokens)
    assert_a6(chunks, chunk_size=204, overlap=32, count_tokens=count_tokens)
    vocabulary = set(source_words)
    for chunk in chunks:
        assert set(chunk.text.split()) <= vocabulary  # no word was cut in half
    assert chunks[-1].text.endswith("item1499") and chunks[0].text.startswith("item0 ")


def test_an_unsplittable_token_is_cut_to_fit(count_tokens):
    # one whitespace-free "word" of thousands of word pieces (punctuation splits it for WordPiece;
    # a plain 100+ character run would be a single [UNK])
    blob = "-".join(f"{n:x}" for n in range(1500))
    parsed = ParsedDocument(
        mime_type="text/plain",
        kind="text",
        title="Blob",
        pages=None,
        blocks=[TextBlock(text=f"The key is {blob} and nothing else.")],
    )
    chunks = chunk_document(parsed=parsed, chunk_size=204, overlap=32, count_tokens=count_tokens)
    assert len(chunks) > 3
    assert all(count_tokens(c.text) <= 204 for c in chunks)  # cut by characters: no overflow needed
    source = f"The key is {blob} and nothing else.".replace(" ", "")
    for chunk in chunks:
        assert chunk.text.replace(" ", "") in source
    assert chunks[0].text.startswith("The key is") and chunks[-1].text.endswith("nothing else.")


# --------------------------------------------------------------------------------------------
# Sections, pages, small documents
# --------------------------------------------------------------------------------------------


def test_short_sections_each_get_their_own_chunk_and_heading_only_sections_merge(count_tokens):
    parsed = parse_document(
        data=docgen.make_markdown(
            [("Wi-Fi", ["The guest network is ACME-Guest."]), ("Printers", ["Printers are on every floor."])],
            title="IT Basics",
        ),
        filename="it.md",
    )
    chunks = chunk_document(parsed=parsed, chunk_size=204, overlap=32, count_tokens=count_tokens)
    assert [(c.section, c.text) for c in chunks] == [
        ("Wi-Fi", "IT Basics\nWi-Fi\nThe guest network is ACME-Guest."),
        ("Printers", "Printers\nPrinters are on every floor."),
    ]


def test_pages_and_sections_of_a_small_pdf(count_tokens):
    parsed = parse_document(
        data=docgen.make_pdf(["First page text.", "Second page text."], sections=["Intro", "Details"]),
        filename="small.pdf",
    )
    chunks = chunk_document(parsed=parsed, chunk_size=204, overlap=32, count_tokens=count_tokens)
    assert [(c.text, c.page_number, c.section) for c in chunks] == [
        ("First page text.", 1, "Intro"),
        ("Second page text.", 2, "Details"),
    ]


def test_chunks_may_span_pages_and_keep_the_starting_page(count_tokens):
    parsed = parse_document(data=docgen.make_pdf(["Alpha one.", "Beta two.", "Gamma three."]), filename="x.pdf")
    chunks = chunk_document(parsed=parsed, chunk_size=204, overlap=32, count_tokens=count_tokens)
    assert [(c.text, c.page_number) for c in chunks] == [("Alpha one.\nBeta two.\nGamma three.", 1)]


def test_zero_overlap_shares_nothing(count_tokens):
    parsed, _ = long_docx(section_count=1)
    chunks = chunk_document(parsed=parsed, chunk_size=100, overlap=0, count_tokens=count_tokens)
    assert len(chunks) > 3
    joined = words(" ".join(c.text for c in chunks))
    assert joined == words(parsed.text)


def test_whitespace_counter_works_too():
    parsed, _ = long_docx(section_count=2)
    count = lambda text: len(text.split())
    chunks = chunk_document(parsed=parsed, chunk_size=60, overlap=10, count_tokens=count)
    assert_a6(chunks, chunk_size=60, overlap=10, count_tokens=count)


@pytest.mark.parametrize(("chunk_size", "overlap"), [(0, 0), (100, -1), (100, 51)])
def test_invalid_sizes_are_refused(chunk_size, overlap):
    parsed = ParsedDocument(mime_type="text/plain", kind="text", title="t", pages=None, blocks=[TextBlock(text="x.")])
    with pytest.raises(ValueError):
        chunk_document(parsed=parsed, chunk_size=chunk_size, overlap=overlap, count_tokens=lambda t: len(t.split()))


# --------------------------------------------------------------------------------------------
# Sentences
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Dr. Smith paid 3.50 EUR. He left.", ["Dr. Smith paid 3.50 EUR.", "He left."]),
        ("Bring a device, e.g. a laptop. Then log in.", ["Bring a device, e.g. a laptop.", "Then log in."]),
        ("Is it open? Yes! It is.", ["Is it open?", "Yes!", "It is."]),
        ("J. R. R. Tolkien wrote it. Fig. 3 shows it.", ["J. R. R. Tolkien wrote it.", "Fig. 3 shows it."]),
        ("The U.S. office closes at 5 p.m. on Fridays.", ["The U.S. office closes at 5 p.m. on Fridays."]),
        ('He said "stop." Then he went.', ['He said "stop."', "Then he went."]),
        ("Version 2.1.4 is out. Update now.", ["Version 2.1.4 is out.", "Update now."]),
        ("Items:\n- first item\n- second item", ["Items:", "- first item", "- second item"]),
        ("Line one wraps\nonto line two. Next.", ["Line one wraps onto line two.", "Next."]),
        ("价格很高。我们走吧。", ["价格很高。", "我们走吧。"]),
        ("", []),
    ],
)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected
