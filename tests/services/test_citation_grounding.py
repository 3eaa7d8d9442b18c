"""The citation normaliser, attribution and the grounding check together, on the styles models write
their citations in: a sentence that carries a citation of a passage supporting it is supported by
it, its citation is the model's (none dropped, none doubled by ragchat), and no sentence is flagged
"No passage among this answer's sources supports this sentence" for a marker it carries. Each style
is one of the fake Ollama server's habits, applied to the same canonical answer."""

from __future__ import annotations

import random

import pytest

from ragchat.fake_ollama.server import CITATION_STYLES, with_citation_habit
from ragchat.services.attribution import CitationAttributor, attribute_citations
from ragchat.services.citations import CitationNormalizer, extract_citations, normalize_citations
from ragchat.services.grounding import check_answer
from ragchat.services.types import SearchResult
from tests.services.test_model_habits import fed_in_pieces

A = "3f2a1c4e-0000-4000-8000-00000000000a"
B = "3f2a1c4e-0000-4000-8000-00000000000b"
CHUNKS = [
    SearchResult(
        document_id=A,
        chunk_index=0,
        document_name="Vacation Policy 2026.pdf",
        chunk_text="Every full-time employee gets 25 days of paid vacation per year. Requests go through the HR portal.",
        score=0.9,
    ),
    SearchResult(
        document_id=B,
        chunk_index=3,
        document_name="Carry-over.md",
        chunk_text="Up to five unused vacation days carry over until 31 March of the next year.",
        score=0.8,
    ),
]
S1, S2 = f"[SourceId: {A}:0]", f"[SourceId: {B}:3]"
# The prompt as the fake server reads it: the passages' SourceId headers, in order.
PROMPT = [
    {"role": "system", "content": "".join(f"[SourceId: {c.source_id}]\n---\n{c.chunk_text}\n---\n" for c in CHUNKS)}
]
CANONICAL = [
    f"Every full-time employee gets 25 days of paid vacation per year {S1}. "
    f"Up to five unused vacation days carry over until 31 March {S2}.",
    # Two citations in a row on one sentence.
    f"Every full-time employee gets 25 days of paid vacation per year {S1}{S2}. Requests go through the HR portal {S1}.",
    # A list, one citation an item.
    f"Your days:\n\n- Every full-time employee gets 25 days of paid vacation per year {S1}.\n"
    f"- Up to five unused vacation days carry over until 31 March {S2}.",
]


def _pipeline(answer: str) -> str:
    return attribute_citations(normalize_citations(answer, CHUNKS), CHUNKS)


@pytest.mark.parametrize("canonical", CANONICAL)
@pytest.mark.parametrize("habit", sorted(CITATION_STYLES))
def test_a_sentence_carrying_a_supporting_citation_is_supported_by_it(habit, canonical):
    written = with_citation_habit(canonical, habit, PROMPT)
    answer = _pipeline(written)
    # Every citation the model wrote is there, in its order; none is ragchat's.
    cited = [(c.source_id, c.attributed) for c in extract_citations(answer, CHUNKS)]
    expected = [
        (s, False) for s in dict.fromkeys(c.source_id for c in CHUNKS if f"[SourceId: {c.source_id}]" in canonical)
    ]
    assert cited == expected, (written, answer)
    # No sentence is unsupported, none carries a marker ragchat attached, each cites what supports it.
    report = check_answer(answer, CHUNKS)
    claims = [s for s in report.sentences if s.status != "none"]
    assert [s.status for s in claims] == ["supported"] * len(claims), (written, answer, report)
    assert report.attributed == 0 and "attributed]" not in answer, (written, answer)
    assert all(s.supported_by in s.cited for s in claims)
    # Nothing of a marker is left in the text a person reads.
    assert not any(ch in answer for ch in "【】"), answer


def test_the_reported_case_a_number_glued_to_its_word():
    """The model wrote "[1]" against the word before it, then "[2]" apart: the first citation was
    left as text, the sentence showing "[1]" was flagged unsupported (the "1" taken for a figure
    the passage lacks), and the page numbered the model's second citation 1."""
    written = (
        "Every full-time employee gets 25 days of paid vacation per year[1]. "
        "Up to five unused vacation days carry over until 31 March [2]."
    )
    answer = _pipeline(written)
    assert answer == (
        f"Every full-time employee gets 25 days of paid vacation per year{S1}. "
        f"Up to five unused vacation days carry over until 31 March {S2}."
    )
    assert [c.source_id for c in extract_citations(answer, CHUNKS)] == [f"{A}:0", f"{B}:3"]
    assert [s.status for s in check_answer(answer, CHUNKS).sentences] == ["supported", "supported"]


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        # An index in prose, a link, a number in parentheses: no citation, as written.
        ("Use x[1] and arr_2[1] or obj.items[1] = 3.", None),
        ("See [the policy](https://example.com)[1](x).", None),
        # A glued number naming no passage of the prompt: left as written, not a figure of the sentence.
        ("Every full-time employee gets 25 days of paid vacation per year[7].", None),
    ],
)
def test_what_is_not_a_glued_citation_stays_as_written(written, expected):
    assert normalize_citations(written, CHUNKS) == (written if expected is None else expected)


def test_a_bracketed_number_left_in_the_text_is_no_figure_the_passage_must_hold():
    report = check_answer("Every full-time employee gets 25 days of paid vacation per year[7].", CHUNKS)
    assert [s.status for s in report.sentences] == ["uncited"]


def test_citations_at_the_start_of_their_sentence_belong_to_it():
    # "[1] … . [2] … ." : the [2] after the first full stop opens the second sentence.
    answer = _pipeline(
        "[1] Every full-time employee gets 25 days of paid vacation per year. "
        "[2] Up to five unused vacation days carry over until 31 March."
    )
    assert answer == (
        f"{S1} Every full-time employee gets 25 days of paid vacation per year. "
        f"{S2} Up to five unused vacation days carry over until 31 March."
    )
    report = check_answer(answer, CHUNKS)
    assert [(s.status, s.cited) for s in report.sentences] == [("supported", (f"{A}:0",)), ("supported", (f"{B}:3",))]
    # A sentence in that style that the passage it names does not hold is flagged without the next
    # sentence's citation, and a sentence without one still gets the supporting passage's.
    answer = _pipeline(
        "[1] Parking is free for every visitor on Sundays. "
        "Up to five unused vacation days carry over until 31 March. "
        "[1] Requests go through the HR portal."
    )
    report = check_answer(answer, CHUNKS)
    assert [(s.status, s.cited, s.attributed) for s in report.sentences] == [
        ("unsupported", (f"{A}:0",), ()),
        ("supported", (f"{B}:3",), (f"{B}:3",)),
        ("supported", (f"{A}:0",), ()),
    ]


LEADING_STREAMED = [
    "[1] Every full-time employee gets 25 days of paid vacation per year. "
    "Up to five unused vacation days carry over until 31 March. [1] Requests go through the HR portal.",
    "- [1] Every full-time employee gets 25 days.\n- [2] Up to five unused vacation days carry over. [1] And more.",
]


@pytest.mark.parametrize("answer", LEADING_STREAMED)
def test_leading_citations_stream_as_the_whole_answer_reads(answer):
    whole = _pipeline(answer)
    rng = random.Random(answer)

    class Both:
        def __init__(self) -> None:
            self.cites, self.attribute = CitationNormalizer(CHUNKS), CitationAttributor(CHUNKS)

        def feed(self, piece: str) -> str:
            return self.attribute.feed(self.cites.feed(piece))

        def finish(self) -> str:
            return self.attribute.feed(self.cites.finish()) + self.attribute.finish()

    for _ in range(60):
        assert fed_in_pieces(Both(), answer, rng, longest=7) == whole
