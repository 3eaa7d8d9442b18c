"""Issue 16: the glossary expands the search query inside the real RAGService (fake Ollama, embedded
store); deterministic (A1)."""

from __future__ import annotations

from ragchat.services.glossary import GlossaryEntry
from ragchat.services.types import RAGRequest
from tests.services.test_rag_integration import VACATION, owners, rag, rag_settings, vector  # noqa: F401

PTO = GlossaryEntry(term="PTO", aliases=("vacation days", "paid time off"), tag="hr")
CONTRACTOR = GlossaryEntry(term="freelancer", aliases=("contractor",), tag="legal")


async def test_glossary_finds_what_the_question_names_otherwise(rag, fake_ollama):  # noqa: F811
    fake_ollama.reply_citing(1)
    question = "How much PTO do I get?"
    without = await rag.generate(RAGRequest(query=question, user_tags=["hr"]))
    assert without.glossary_terms == [] and without.retrieval_query == question
    before = max((c.score for c in without.context if c.document_id == VACATION), default=0.0)

    with_glossary = await rag.generate(RAGRequest(query=question, user_tags=["hr"], glossary=(CONTRACTOR, PTO)))
    assert with_glossary.glossary_terms == ["PTO"]
    assert with_glossary.retrieval_query == "How much PTO do I get? (vacation days; paid time off)"
    assert with_glossary.query_strategy.endswith("+ glossary")
    assert with_glossary.context[0].document_id == VACATION
    assert with_glossary.context[0].score > before + 0.1  # the vacation passage now matches clearly
    # The model is asked the question as written; only the search is expanded.
    prompts = [r.body for r in fake_ollama.requests_to("/api/chat")]
    assert prompts[-2]["messages"][-1]["content"] == question

    # A1: the same glossary in another order gives the same search and the same top results.
    again = await rag.generate(RAGRequest(query=question, user_tags=["hr"], glossary=(PTO, CONTRACTOR)))
    assert again.retrieval_query == with_glossary.retrieval_query
    assert [c.source_id for c in again.context] == [c.source_id for c in with_glossary.context]
