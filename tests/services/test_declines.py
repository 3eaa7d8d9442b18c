"""A model's "I don't know": recognised, held back on the stream (DeclineGate), and given a second
look at the passages that hold the question's words (RAGService, against the fake Ollama)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragchat.services.declines import DeclineGate, says_dont_know
from ragchat.services.prompts import MODEL_INSUFFICIENT_SENTENCE
from ragchat.services.types import RAGRequest, TagOwner
from tests.services.test_rag_integration import (  # noqa: F401 - fixtures shared with the integration tests
    VACATION_Q,
    chat_requests,
    collect,
    owners,
    rag,
    rag_settings,
    vector,
)


def test_declines_are_recognised():
    assert says_dont_know(MODEL_INSUFFICIENT_SENTENCE)
    assert says_dont_know("The context does not provide information about a dress code.")
    assert says_dont_know("I'm sorry, the documents do not specify how many attempts lock an account.")
    assert not says_dont_know("The fiscal year runs from 1 April to 31 March.")


def run(gate: DeclineGate, pieces: list[str]) -> str:
    return "".join(gate.feed(p) for p in pieces) + gate.finish()


def test_an_answer_streams_through_at_once_unless_it_opens_like_a_decline():
    gate = DeclineGate()
    assert gate.feed("The ") == ""  # "The context…" or "The fiscal…": not known yet
    assert gate.feed("fiscal ") == "The fiscal "  # not a decline's opening: shown, and from now on as it comes
    assert gate.feed("year") == "year"
    assert gate.finish() == "" and not gate.declined
    # an opening like a decline that turns out to answer is shown when its first sentence ends
    gate = DeclineGate()
    assert gate.feed("The context says ") == ""
    assert gate.feed("8 attempts lock it. More") == "The context says 8 attempts lock it. More"
    assert not gate.declined


@pytest.mark.parametrize(
    "answer",
    [
        MODEL_INSUFFICIENT_SENTENCE,
        "The provided context does not mention how many failed attempts lock an account.",
        "Sorry, I cannot find that in the documents.",
        "I don't know.",
    ],
)
def test_a_decline_is_held_to_the_end(answer):
    gate = DeclineGate()
    words = answer.split(" ")
    assert run(gate, [w + " " for w in words[:-1]] + [words[-1]]) == ""
    assert gate.declined and gate.held == answer


@given(st.text(alphabet="Ithe contx dsa'.?!\n", max_size=60), st.lists(st.integers(1, 6), max_size=30))
def test_what_is_shown_and_held_is_the_whole_answer(answer, cuts):
    pieces, rest = [], answer
    for n in cuts:
        pieces.append(rest[:n])
        rest = rest[n:]
    pieces.append(rest)
    gate = DeclineGate()
    shown = run(gate, pieces)
    assert (gate.held if gate.declined else shown) == answer
    assert not (gate.declined and shown)


async def test_a_decline_gets_a_second_look_at_the_passages_holding_the_question(rag, fake_ollama, owners):  # noqa: F811
    """The model declines with five passages in its prompt; with the two that hold most of the
    question's words it answers. The asker sees only that answer, never the decline."""
    owners[("hr", "default")] = TagOwner(user_id="42", email="hr.owner@company.com")

    def answer(messages):
        passages = re.findall(r"^\[SourceId:", messages[0]["content"], flags=re.MULTILINE)
        if len(passages) > 2:
            return MODEL_INSUFFICIENT_SENTENCE
        return "Full-time employees get twenty five vacation days of paid leave per calendar year."

    fake_ollama.reply_with(answer)
    fake_ollama.rating(90)
    events, tokens, error = await collect(rag, RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    assert error is None
    final = events[-1].response
    streamed = "".join(tokens)
    assert "enough information" not in streamed
    assert streamed == final.answer and final.answer.startswith("Full-time employees get twenty five")
    assert final.citations and final.action == "CITE"
    first, second = chat_requests(fake_ollama)
    assert len(re.findall(r"^\[SourceId:", second["messages"][0]["content"], flags=re.MULTILINE)) <= 2


async def test_a_decline_without_a_strong_passage_stays_and_is_routed(rag, fake_ollama, owners):  # noqa: F811
    owners[("hr", "default")] = TagOwner(user_id="42", email="hr.owner@company.com")
    fake_ollama.reply(MODEL_INSUFFICIENT_SENTENCE)
    events, tokens, _ = await collect(rag, RAGRequest(query="Which rules apply to interns abroad?", user_tags=["hr"]))
    final = events[-1].response
    assert "".join(tokens) == final.answer == MODEL_INSUFFICIENT_SENTENCE
    assert final.action == "ROUTE"
    # no second look: nothing holds most of the question's words
    assert len(chat_requests(fake_ollama)) == 1


async def test_a_second_decline_shows_the_first(rag, fake_ollama, owners):  # noqa: F811
    owners[("hr", "default")] = TagOwner(user_id="42", email="hr.owner@company.com")
    fake_ollama.reply(MODEL_INSUFFICIENT_SENTENCE)
    events, tokens, _ = await collect(rag, RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    final = events[-1].response
    assert tokens == [MODEL_INSUFFICIENT_SENTENCE] and final.answer == MODEL_INSUFFICIENT_SENTENCE
    assert final.action == "ROUTE"
    assert len(chat_requests(fake_ollama)) == 2
