"""Real models' habits: citations written their own way, thinking in the content, ratings in words
or on other scales. Each habit is normalised where the answer is made (the RAG core), so what the
asker sees, what is stored and what grounding checks are the same text."""

from __future__ import annotations

import random

import pytest

from ragchat.fake_ollama.server import CITATION_STYLES, INVENTED_SOURCE_ID
from ragchat.services.citations import CitationNormalizer, extract_citations, normalize_citations
from ragchat.services.errors import EmptyAnswerError
from ragchat.services.llm import parse_rating
from ragchat.services.reasoning import ThinkFilter, after_thinking, strip_think
from ragchat.services.types import ContextEvent, RAGRequest, SearchResult
from tests.services.test_rag_integration import VACATION_Q, collect, owners, rag, rag_settings, vector  # noqa: F401

A = "3f2a1c4e-0000-4000-8000-00000000000a"
B = "3f2a1c4e-0000-4000-8000-00000000000b"
CHUNKS = [
    SearchResult(
        document_id=A, chunk_index=0, document_name="Vacation Policy 2026.pdf", chunk_text="25 days.", score=0.9
    ),
    SearchResult(document_id=B, chunk_index=3, document_name="Travel.md", chunk_text="Book trains.", score=0.8),
]
S1, S2 = f"[SourceId: {A}:0]", f"[SourceId: {B}:3]"


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        # The canonical form stays as it is.
        (f"You get 25 days {S1}.", f"You get 25 days {S1}."),
        # Numbered: the n-th passage of the prompt.
        ("You get 25 days [S1].", f"You get 25 days {S1}."),
        ("You get 25 days [Source 1].", f"You get 25 days {S1}."),
        ("You get 25 days [source: 2].", f"You get 25 days {S2}."),
        ("You get 25 days [1].", f"You get 25 days {S1}."),
        ("You get 25 days [1][2].", f"You get 25 days {S1}{S2}."),
        ("According to Source 2, book trains.", f"According to {S2}, book trains."),
        ("Book trains (Source 2).", f"Book trains {S2}."),
        # Several ids in one bracket.
        (f"Both [SourceId: {A}:0, {B}:3].", f"Both {S1}{S2}."),
        (f"Both [SourceId: {A}:0; SourceId: {B}:3].", f"Both {S1}{S2}."),
        ("Both [1, 2].", f"Both {S1}{S2}."),
        ("Both [S1; S2].", f"Both {S1}{S2}."),
        # Stray spaces and case, other brackets, full-width brackets and colons.
        (f"Days [ sourceid : {A.upper()}:0 ].", f"Days {S1}."),
        (f"Days (SourceId: {A}:0).", f"Days {S1}."),
        (f"Days 【SourceId：{A}:0】.", f"Days {S1}."),
        (f"Days ［SourceId: {A}：0］.", f"Days {S1}."),
        (f"Days [{A}:0].", f"Days {S1}."),
        # The document's name.
        ("Days [Vacation Policy 2026.pdf].", f"Days {S1}."),
        ("Days [Document: Travel.md].", f"Days {S2}."),
        # Invented ids are dropped with the space before them; a known one next to them stays.
        (f"Days [SourceId: {A}:7].", "Days."),
        ("Days [S9].", "Days."),
        (f"Days [SourceId: {A}:7, {B}:3].", f"Days {S2}."),
        # Not citations: left as written.
        (
            "Use x[1] and [a link](https://example.com) (see page 3).",
            "Use x[1] and [a link](https://example.com) (see page 3).",
        ),
        (
            "Options: (1) email, (2) phone. [Note] Source code is open.",
            "Options: (1) email, (2) phone. [Note] Source code is open.",
        ),
        (
            "Run `days[1]` or:\n\n```python\nprint([1, 2])  # Source 1\n```\n",
            "Run `days[1]` or:\n\n```python\nprint([1, 2])  # Source 1\n```\n",
        ),
    ],
)
def test_citation_habits_are_normalised(written, expected):
    assert normalize_citations(written, CHUNKS) == expected


def test_normalised_citations_are_extracted():
    answer = normalize_citations("You get 25 days [S1]; book trains 【Source 2】. Parking [S7].", CHUNKS)
    assert [c.source_id for c in extract_citations(answer, CHUNKS)] == [f"{A}:0", f"{B}:3"]


def fed_in_pieces(stream, text: str, rng: random.Random, *, longest: int) -> str:
    """`text` fed to a streaming filter in random pieces of 1 to `longest` characters, then
    finished: everything it gave out, joined."""
    out, i = [], 0
    while i < len(text):
        j = i + rng.randint(1, longest)
        out.append(stream.feed(text[i:j]))
        i = j
    out.append(stream.finish())
    return "".join(out)


STREAMED = [
    "You get 25 days [S1]. Book trains (Source 2), not planes [SourceId: " + A + ":7].",
    "According to Source 1, you get 25 days 【SourceId：" + A + ":0】; see [1, 2] and x[1].",
    "Run `days[1]` then:\n\n```\nprint([1])\n```\n\nDone [Travel.md] (see page 3).",
    "Ends with an open bracket [S",
    "Ends with a held space   ",
    # One long line: settled sentence by sentence, invented markers after a sentence's end too.
    " ".join(
        f"Rule {n} applies (see page {n}) [S{n % 3 + 1}]. Next. [S9] `code [1]` x[1] Source 2." for n in range(40)
    ),
]


@pytest.mark.parametrize("answer", STREAMED)
def test_streamed_pieces_join_to_the_normalised_answer(answer):
    # However the model splits its output, the pieces given out are the normalised answer.
    whole = normalize_citations(answer, CHUNKS)
    rng = random.Random(answer)
    for _ in range(100):
        normalizer = CitationNormalizer(CHUNKS)
        assert fed_in_pieces(normalizer, answer, rng, longest=6) == whole
        assert normalizer.text == whole


def test_a_marker_is_held_back_until_it_closes():
    normalizer = CitationNormalizer(CHUNKS)
    assert normalizer.feed("You get 25 days") == "You get 25 days"
    assert normalizer.feed(" [Sour") == ""  # the space too: it goes if the marker is invented
    assert normalizer.feed("ce 1]") == f" {S1}"
    assert normalizer.feed(" and more") == " and more"
    assert normalizer.feed(" in so") == " in"  # "so…" may become "Source 2"
    assert normalizer.finish() == " so"


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("<think>The policy says 25, maybe 30?</think>\n\nYou get 25 days.", "You get 25 days."),
        ("<THINKING>hmm</THINKING>Yes.", "Yes."),
        ("Yes.<think>unfinished", "Yes."),
        ("Stray closing tag</think> removed.", "Stray closing tag removed."),
        ("a < b and <t> are kept", "a < b and <t> are kept"),
    ],
)
def test_thinking_never_reaches_the_answer(written, expected):
    assert strip_think(written) == expected
    rng = random.Random(written)
    for _ in range(100):
        assert fed_in_pieces(ThinkFilter(), written, rng, longest=5) == expected


def test_a_reply_that_only_closes_its_thinking():
    assert after_thinking("The answer cites 2024 policy, 10 days... </think>\n80") == "80"


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ("85", 85),
        ("Score: 85/100", 85),
        ("8/10", 80),
        ("4 / 5", 80),
        ("85%", 85),
        ("Rating: 85", 85),
        ("Confidence: 0.85", 85),
        ("I rate it 72.", 72),
        ("Based on the 2024 policy, I'd give it 90", 90),
        ("<think>maybe 10 or 20</think>\n\n75", 75),
        ("The 2024 handbook says 25 days. </think> 60", 60),
        ("The answer is fully supported by the context.", 90),
        ("High", 90),
        ("Mostly supported.", 75),
        ("Good", 75),
        ("Partially supported: the dates are missing.", 55),
        ("Moderate", 55),
        ("Weakly supported.", 35),
        ("Low", 35),
        ("Not supported by the context.", 10),
        ("The answer is not well supported.", 35),
        ("150", 100),
        ("", None),
        ("I cannot rate this.", None),
    ],
)
def test_ratings_in_the_forms_models_write_them(reply, score):
    assert parse_rating(reply) == score


# ---------------------------------------------------------------- through the real RAGService


@pytest.mark.parametrize("habit", sorted(CITATION_STYLES))
async def test_every_habit_through_the_pipeline(rag, fake_ollama, habit):  # noqa: F811
    """The fake Ollama answers citing the prompt's first two passages in `habit`'s way, thinks
    aloud, and rates on a ten-point scale: the asker gets the canonical answer, token by token."""
    fake_ollama.reply_citing(2)
    fake_ollama.habits(citations=habit, thinks_aloud="The user asks about 30 days? No, 25 [S3].")
    fake_ollama.rating("<think>85 or 90?</think>8/10")
    events, tokens, error = await collect(rag, RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    assert error is None
    response = events[-1].response
    prompt_ids = [r.source_id for r in response.context]
    assert [c.source_id for c in response.citations] == prompt_ids[:2]
    assert "".join(tokens) == response.answer
    assert "<think>" not in response.answer and "30 days" not in response.answer
    assert INVENTED_SOURCE_ID.split(":")[0] not in response.answer
    markers = [f"[SourceId: {i}]" for i in prompt_ids[:2]]
    assert all(m in response.answer for m in markers) and response.answer.count("[SourceId:") == 2
    # Every sentence that cites is checked against what it cites.
    assert response.grounding.cited_supported == 2
    assert response.confidence.llm_score == 80


async def test_a_model_that_only_thinks_answers_nothing_but_keeps_the_passages(rag, fake_ollama):  # noqa: F811
    # Its thinking ran out of tokens (or it never closed the block): no empty answer is rated and
    # routed; the asker gets the upstream error with the passages found, like any failed answer.
    fake_ollama.reply("<think>I am not sure what the documents say")
    events, tokens, error = await collect(rag, RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    assert isinstance(error, EmptyAnswerError) and "wrote no answer" in str(error)
    assert tokens == [] and any(isinstance(e, ContextEvent) and e.results for e in events)
