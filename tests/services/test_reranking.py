"""R-RET-7: the optional cross-encoder stage, configured by RAG_RERANKER, degrading gracefully. A
real cross-encoder scoring needs torch (the `rerank` extra): tests/export/test_reranking.py.

References: requirement IDs (R-…): docs/requirements.md.
"""

import logging
from dataclasses import replace

import pytest

from ragchat.services.config import RAGSettings
from ragchat.services.reranking import CrossEncoderReranker, build_reranker
from ragchat.services.retrieval import apply_reranker
from ragchat.services.types import SearchResult

DOC = "0f3e6a52-77c1-4c0e-9d8e-5b1d2c3a4f60"
QUERY = "How many vacation days do employees get?"
TEXTS = [
    "The canteen opens at 11:30 and serves a vegetarian dish every day.",
    "Every full-time employee receives 25 vacation days per year.",
    "Parking permits are issued by the facilities desk.",
    "Unused vacation days carry over until March 31 of the next year.",
]


def _results() -> list[SearchResult]:
    return [SearchResult(DOC, i, "Handbook", text, 0.5) for i, text in enumerate(TEXTS)]


def test_no_setting_no_stage():
    assert build_reranker(RAGSettings()) is None
    assert isinstance(build_reranker(replace(RAGSettings(), rag_reranker="some/model")), CrossEncoderReranker)


async def test_unloadable_model_passes_results_through_with_a_warning(caplog):
    reranker = CrossEncoderReranker("no-such-org/no-such-cross-encoder")
    results = _results()
    with caplog.at_level(logging.WARNING):
        out = await apply_reranker(reranker, query=QUERY, results=results)
        again = await apply_reranker(reranker, query=QUERY, results=results)
    assert out == results and again == results
    assert sum("reranker failed" in r.getMessage() for r in caplog.records) == 2
    assert reranker.status()["status"] == "failed"
    first_error = reranker._error
    with pytest.raises(RuntimeError):
        await reranker.rerank(QUERY, results)
    assert reranker._error is first_error  # the load is not retried on every question
