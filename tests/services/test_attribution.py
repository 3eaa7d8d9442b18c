"""Citations that do not depend on the model's habits (services/attribution.py): a sentence a
passage supports and that cites no supporting passage gets that passage's citation, attributed by
ragchat; the model's own citations are kept; an unsupported sentence never gets one. Through the
real RAGService with the fake Ollama in every citation habit, including writing none."""

from __future__ import annotations

import random

import pytest

from ragchat.fake_ollama.server import CITATION_HABITS, NO_CITATIONS
from ragchat.services.attribution import CitationAttributor, attribute_citations
from ragchat.services.citations import CitationNormalizer, extract_citations, normalize_citations
from ragchat.services.grounding import check_answer
from ragchat.services.types import RAGRequest, SearchResult
from tests.services.test_model_habits import fed_in_pieces
from tests.services.test_rag_integration import VACATION_Q, collect, owners, rag, rag_settings, vector  # noqa: F401

A = "3f2a1c4e-0000-4000-8000-00000000000a"
B = "3f2a1c4e-0000-4000-8000-00000000000b"
CHUNKS = [
    SearchResult(
        document_id=A,
        chunk_index=0,
        document_name="Vacation Policy 2026.pdf",
        chunk_text="Every full-time employee gets 25 days of paid vacation per year. Unused days expire on 31 March.",
        score=0.9,
    ),
    SearchResult(
        document_id=B,
        chunk_index=3,
        document_name="Travel.md",
        chunk_text="Book trains for trips under 500 km; flights need the approval of your manager.",
        score=0.8,
    ),
]
S1, S2 = f"[SourceId: {A}:0]", f"[SourceId: {B}:3]"
ATTRIBUTED_1, ATTRIBUTED_2 = f"[SourceId: {A}:0; attributed]", f"[SourceId: {B}:3; attributed]"


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        # A supported sentence without a citation gets its passage's, before its end mark.
        (
            "Each full-time employee gets 25 days of paid vacation per year.",
            f"Each full-time employee gets 25 days of paid vacation per year {ATTRIBUTED_1}.",
        ),
        # The model's own citation is kept, and nothing is added to it.
        (
            f"Each full-time employee gets 25 days of paid vacation per year {S1}.",
            f"Each full-time employee gets 25 days of paid vacation per year {S1}.",
        ),
        (
            f"Each full-time employee gets 25 days of paid vacation per year. {S1} Trains are booked for trips under 500 km.",
            f"Each full-time employee gets 25 days of paid vacation per year. {S1} Trains are booked for trips under "
            f"500 km {ATTRIBUTED_2}.",
        ),
        # A sentence citing a passage that does not hold it gets the one that does, after it.
        (
            f"Flights need the approval of your manager {S1}.",
            f"Flights need the approval of your manager {S1} {ATTRIBUTED_2}.",
        ),
        # Unsupported (a changed figure) or no claim at all: nothing attached.
        ("Each full-time employee gets 30 days of paid vacation per year.", None),
        ("Here is what I found:\n\nGood question!", None),
        ("I don't have enough information in the available documents to answer this question.", None),
        # List items end at the line's end; a sentence ending the answer without a mark too.
        (
            "Rules:\n- Unused days expire on 31 March\n- Flights need the approval of your manager",
            f"Rules:\n- Unused days expire on 31 March {ATTRIBUTED_1}\n- Flights need the approval of your "
            f"manager {ATTRIBUTED_2}",
        ),
        # Code is no sentence.
        ("```\nflights need the approval of your manager\n```\n", None),
    ],
)
def test_supported_uncited_sentences_get_an_attributed_citation(written, expected):
    assert attribute_citations(written, CHUNKS) == (written if expected is None else expected)


def test_after_attribution_no_supported_sentence_is_uncited_and_the_citations_say_who_cited():
    answer = attribute_citations(
        f"Each full-time employee gets 25 days of paid vacation per year {S1}. Unused days expire on 31 March. "
        "Flights need the approval of your manager. Parking is free on Sundays.",
        CHUNKS,
    )
    report = check_answer(answer, CHUNKS)
    assert [s.status for s in report.sentences] == ["supported", "supported", "supported", "unsupported"]
    assert [s.attributed for s in report.sentences] == [(), (f"{A}:0",), (f"{B}:3",), ()]
    assert report.attributed == 2 and report.cited_supported == 3
    # A passage the model cited once is the model's citation, even where ragchat attached it again.
    assert [(c.source_id, c.attributed) for c in extract_citations(answer, CHUNKS)] == [
        (f"{A}:0", False),
        (f"{B}:3", True),
    ]


def test_a_marker_in_the_attributed_form_written_by_the_model_is_the_models():
    written = f"Each full-time employee gets 25 days of paid vacation per year {ATTRIBUTED_1}."
    normalised = normalize_citations(written, CHUNKS)
    assert normalised == f"Each full-time employee gets 25 days of paid vacation per year {S1}."
    [citation] = extract_citations(attribute_citations(normalised, CHUNKS), CHUNKS)
    assert citation.attributed is False


STREAMED = [
    "Each full-time employee gets 25 days of paid vacation per year. Unused days expire on 31 March [S1]. "
    "Flights need the approval of your manager.\n\n- Book trains for trips under 500 km\n- Parking is free",
    "Every full-time employee gets 25 days (see page 3) of paid vacation per year. [2] e.g. Dr. Who gets 30 days! "
    "Unused days expire on 31 March",
    "Run this:\n\n```\nflights need approval. Of your manager.\n```\n\nFlights need the approval of your manager [9].",
    "Unused days expire on 31 March.   ",
    # Markers after a sentence's end mark belong to it; a long sentence and a long code block go
    # out as they come (the text is split again only where a sentence may have ended).
    "Unused days expire on 31 March. [1] [2]  Each full-time employee gets 25 days.\n- Book trains for trips\n" * 3,
    "Every full-time employee gets 25 days" + ", and every full-time employee gets 25 days of paid vacation" * 40,
    "Run:\n\n```\n" + "x = 1  # book trains. For trips!\n" * 40 + "```\nUnused days expire on 31 March.",
]


@pytest.mark.parametrize("answer", STREAMED)
def test_streamed_pieces_join_to_the_attributed_answer(answer):
    # However the model splits its output, what the normaliser then the attributor give out joins to
    # the answer attributed whole, and a marker is only ever appended.
    whole = attribute_citations(normalize_citations(answer, CHUNKS), CHUNKS)
    assert "attributed]" in whole
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


def test_a_cut_off_last_sentence_is_given_out_unattributed():
    attributor = CitationAttributor(CHUNKS)
    given = attributor.feed("Unused days expire on 31 March. Flights need the approval of your")
    given += attributor.finish(complete=False)
    assert given == f"Unused days expire on 31 March {ATTRIBUTED_1}. Flights need the approval of your"


# ---------------------------------------------------------------- through the real RAGService


@pytest.mark.parametrize("habit", sorted(CITATION_HABITS))
async def test_in_every_citation_habit_every_supported_sentence_is_cited(rag, fake_ollama, habit):  # noqa: F811
    """The fake Ollama answers with a sentence from each of the prompt's first two passages, citing
    them in `habit`'s way (or not at all): the answer carries valid citations, no supported sentence
    is left uncited, and the model's own citations are kept, not doubled."""
    fake_ollama.reply_citing(2)
    fake_ollama.habits(citations=habit)
    events, tokens, error = await collect(rag, RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    assert error is None
    response = events[-1].response
    assert "".join(tokens) == response.answer
    prompt_ids = [r.source_id for r in response.context]
    assert [c.source_id for c in response.citations] == prompt_ids[:2]
    assert all(c.attributed is (habit == NO_CITATIONS) for c in response.citations)
    assert response.answer.count("[SourceId:") == 2
    grounding = response.grounding
    assert [s.status for s in grounding.sentences] == ["supported", "supported"]
    assert grounding.attributed == (2 if habit == NO_CITATIONS else 0)
    assert response.grounded is True


async def test_an_unsupported_uncited_answer_gets_no_citation(rag, fake_ollama):  # noqa: F811
    fake_ollama.reply("Full-time employees get thirty vacation days of paid leave per calendar year.")
    response = await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    assert response.citations == [] and "[SourceId" not in response.answer
    assert [s.status for s in response.grounding.sentences] == ["unsupported"]
