"""Hybrid confidence (spec v3 "Confidence Scoring (Hybrid)") and the CITE/ROUTE action.

overall = int(retrieval*30 + coverage*40 + llm/100*30), clamped to 0-100, zero when nothing was
retrieved. Coverage is the spec's keyword overlap, averaged with the share of the answer's claims
that the per-sentence grounding check (services/grounding.py, axiom A2) finds supported, when the
answer states anything. One spec defect is fixed here: coverage ignores [SourceId: ...] markers, and the
pipeline passes the chunk texts (coverage_context) rather than the prompt's header lines, because
otherwise every citation adds its own id's hex pieces and "sourceid" as matching terms.

References: "spec v3": docs/specs/rag-service-spec-v3-FINAL.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from .bm25 import best_keyword_share
from .citations import strip_source_ids
from .types import ConfidenceScore, SearchResult

# Under this share of the question's words in the passages an answer cites, the answer is about
# something else than what was asked (docs/answer-quality.md "Cited or routed").
QUESTION_FOCUS_MIN = 0.5

NOT_CITED = "No passage cited"
OFF_QUESTION = "The cited passages hold few of the question's words"
NO_FIGURE = "The question asks for a figure and the answer states none"


# Common English stopwords (expand as needed)
STOPWORDS = {
    'the', 'a', 'an', 'is', 'are', 'was', 'were', 'be', 'been', 'being',
    'have', 'has', 'had', 'do', 'does', 'did', 'will', 'would', 'could',
    'should', 'may', 'might', 'must', 'shall', 'can', 'need', 'dare',
    'to', 'of', 'in', 'for', 'on', 'with', 'at', 'by', 'from', 'as',
    'into', 'through', 'during', 'before', 'after', 'above', 'below',
    'between', 'under', 'again', 'further', 'then', 'once', 'here',
    'there', 'when', 'where', 'why', 'how', 'all', 'each', 'few', 'more',
    'most', 'other', 'some', 'such', 'no', 'nor', 'not', 'only', 'own',
    'same', 'so', 'than', 'too', 'very', 'just', 'and', 'but', 'if', 'or',
    'because', 'until', 'while', 'this', 'that', 'these', 'those', 'i',
    'me', 'my', 'myself', 'we', 'our', 'ours', 'you', 'your', 'yours',
    'he', 'him', 'his', 'she', 'her', 'hers', 'it', 'its', 'they', 'them',
}  # fmt: skip


def extract_key_terms(text: str) -> set[str]:
    """Significant terms: lowercased alphanumeric words, minus stopwords and words under 3 chars."""
    words = re.findall(r"\b[a-z0-9]+\b", text.lower())
    return {w for w in words if w not in STOPWORDS and len(w) >= 3}


def calculate_coverage(answer: str, context: str) -> float:
    """Fraction (0-1) of the answer's key terms found in the context; SourceId markers not counted."""
    answer_terms = extract_key_terms(strip_source_ids(answer))
    context_terms = extract_key_terms(strip_source_ids(context))
    if not answer_terms:
        return 0.0
    matches = answer_terms & context_terms
    return len(matches) / len(answer_terms)


def coverage_context(chunks: Sequence[SearchResult]) -> str:
    """What coverage is measured against: the chunk texts only, not their SourceId/Document headers."""
    return "\n\n".join(c.chunk_text for c in chunks)


def calculate_confidence(
    retrieval_results: Sequence[SearchResult],
    answer: str,
    context: str,
    llm_score: int,
    supported_share: float | None = None,
) -> ConfidenceScore:
    """Combine retrieval, coverage and LLM signals; zero confidence if nothing was retrieved.
    `supported_share`: the grounding check's share of supported claims (None: not checked, or no claim)."""
    if not retrieval_results:
        return ConfidenceScore(overall=0, retrieval_score=0.0, coverage_score=0.0, llm_score=0)

    retrieval_score = sum(r.score for r in retrieval_results) / len(retrieval_results)
    coverage_score = calculate_coverage(answer, context)
    if supported_share is not None:
        coverage_score = (coverage_score + supported_share) / 2
    llm_normalized = llm_score / 100
    overall = int((retrieval_score * 30) + (coverage_score * 40) + (llm_normalized * 30))
    return ConfidenceScore(
        overall=min(100, max(0, overall)),
        retrieval_score=retrieval_score,
        coverage_score=coverage_score,
        llm_score=llm_score,
    )


def determine_action(overall: int, threshold: int) -> Literal["CITE", "ROUTE"]:
    """spec v3 step 8: confidence >= threshold (60) cites, anything lower goes to a human."""
    return "CITE" if overall >= threshold else "ROUTE"


def question_focus(queries: Sequence[str], cited_texts: Sequence[str]) -> float | None:
    """Share of the question's words (BM25's terms, as the floor rule counts them) that the passages
    an answer cites hold together: the best of the question as asked and as searched (a follow-up's
    topic, glossary names). None when no query has a word to count."""
    return best_keyword_share(queries, "\n".join(cited_texts))


def answer_action(
    overall: int, threshold: int, *, cited: bool, focus: float | None, figure: bool = True
) -> tuple[Literal["CITE", "ROUTE"], str | None]:
    """Cited or routed, whatever the model wrote: spec v3 step 8 (confidence under the threshold
    routes), then an answer that cites no passage routes, then one whose cited passages hold under
    QUESTION_FOCUS_MIN of the question's words, then one that states no figure where the question
    asks for one (`figure`: grounding.answers_with_a_figure). Returns the action and, for the last three, why."""
    if determine_action(overall, threshold) == "ROUTE":
        return "ROUTE", None
    if not cited:
        return "ROUTE", NOT_CITED
    if focus is not None and focus < QUESTION_FOCUS_MIN:
        return "ROUTE", OFF_QUESTION
    if not figure:
        return "ROUTE", NO_FIGURE
    return "CITE", None
