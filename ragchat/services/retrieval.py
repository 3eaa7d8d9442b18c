"""Quality retrieval (spec v3 "Retrieval Quality Controls"), the optional rerank stage (R-RET-7)
and the query strategy for follow-ups (R-RET-4, docs/specs/rag-providers-spec.md "Hybrid Query Strategy").

Access control is not here: the vector service filters tenant and tags inside every search.

References: requirement IDs (R-…): docs/requirements.md; "spec v3": docs/specs/rag-service-spec-v3-FINAL.md.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from .bm25 import best_keyword_share, keyword_share
from .confidence import STOPWORDS
from .config import RAGSettings
from .types import ChatMessage, SearchResult

logger = logging.getLogger(__name__)

STRATEGY_FIRST = "first message (raw query)"
STRATEGY_FOLLOW_UP = "follow-up (contextualized topic)"
STRATEGY_NEW_TOPIC = "new topic (raw query)"

# How much earlier conversation a follow-up's standalone query carries: the last few user turns,
# a bounded number of their terms, so an old topic fades and the embedding stays focused.
TOPIC_USER_TURNS = 3
TOPIC_MAX_TERMS = 12
_TERM_RE = re.compile(r"\b[a-z0-9][a-z0-9'-]*[a-z0-9]\b|\b[a-z0-9]\b")
# Question words carry no topic; they are dropped from the accumulated topic (not from the query).
_TOPIC_NOISE = STOPWORDS | {
    "what", "which", "who", "whom", "whose", "many", "much", "get", "got", "tell", "about",
    "please", "know", "want", "like", "also", "any", "anything", "something", "thanks", "thank",
    "hello", "hey", "does", "did", "doing", "done", "give", "show", "explain",
}  # fmt: skip

# A question that leans on the conversation: it opens with a continuation ("and", "what about")
# or points back at something said before ("it", "those", "the large ones", "above that").
_CONTINUATION_OPENERS = (
    "and", "but", "or", "so", "also", "then", "what about", "how about", "what if", "same for",
    "same with", "is that", "does that", "and if", "ok and", "okay and", "plus",
)  # fmt: skip
_BACK_REFERENCES = {
    "it", "its", "it's", "that", "those", "these", "this", "they", "them", "their", "theirs",
    "there", "he", "she", "him", "her", "his", "hers", "one", "ones", "such", "same", "instead",
    "else", "former", "latter", "above", "below", "too", "either", "neither", "both",
}  # fmt: skip
# A question with this many topic words of its own, and nothing pointing back, stands alone.
SELF_CONTAINED_TERMS = 3
# A question that names the asker's own action and what it is done to ("How do I contact the
# helpdesk?", "Where do I submit expenses?", "Can I bring guests?") says all it means: with
# ACTION_TERMS topic words (the verb and its object) and nothing pointing back, it stands alone.
# "When is the post-mortem due?" names no action of the asker's and still leans on the topic.
_OWN_ACTION = re.compile(
    r"^(?:(?:how|where|when|who|whom|which|what|why) )?"
    r"(?:do|can|could|may|might|should|must|shall|will|would) (?:i|we|you) [a-z]"
)
ACTION_TERMS = 2


@runtime_checkable
class Reranker(Protocol):
    """Reorders search results by relevance to the query (e.g. a cross-encoder).

    It returns the same SearchResult objects (a subset is allowed), best first; their cosine
    `score` is kept, because confidence and the similarity floor are defined on it.
    """

    async def rerank(self, query: str, results: list[SearchResult]) -> list[SearchResult]: ...


# The similarity floor (spec v3's 0.3 on the cosine) is for meaning, and a small embedding model
# scores some literal matches under it: "When does the fiscal year start?" against "The fiscal year
# runs from 1 April to 31 March" had cosine 0.24 with all-MiniLM-L6-v2, so the question got "I
# don't know". A candidate that holds at least this share of the question's words (BM25's own
# terms: stemmed, stopwords out) is kept whatever its cosine; a question whose words no passage
# holds still gets zero context (docs/answer-quality.md "The similarity floor").
KEYWORD_MATCH_SHARE = 0.6


def strong_passages(chunks: Sequence[SearchResult], queries: Sequence[str], *, limit: int = 2) -> list[SearchResult]:
    """The passages that hold at least KEYWORD_MATCH_SHARE of a query's words (the question as
    asked or as searched), most words first, then in the prompt's order; at most `limit`."""
    shares = [(best_keyword_share(queries, c.chunk_text) or 0.0, i) for i, c in enumerate(chunks)]
    strong = sorted((-share, i) for share, i in shares if share >= KEYWORD_MATCH_SHARE)
    return [chunks[i] for _, i in strong[:limit]]


def passes_floor(candidate: SearchResult, *, query: str, min_score: float) -> bool:
    """Whether a search candidate is good enough for the prompt: cosine at or above the floor, or
    a strong keyword match (KEYWORD_MATCH_SHARE of the query's words)."""
    return candidate.score >= min_score or keyword_share(query, candidate.chunk_text) >= KEYWORD_MATCH_SHARE


def jaccard(a: set[str], b: set[str]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def deduplicate_chunks(chunks: Sequence[SearchResult], *, threshold: float, cap: int) -> list[SearchResult]:
    """Drop near-duplicates (word-set Jaccard > threshold), keeping the earlier (better) one.

    O(n^2), so at most `cap` candidates are considered; any beyond it are not processed.
    """
    result: list[SearchResult] = []
    kept_words: list[set[str]] = []
    for chunk in list(chunks)[:cap]:
        words = set(chunk.chunk_text.lower().split())
        if any(jaccard(words, existing) > threshold for existing in kept_words):
            continue
        result.append(chunk)
        kept_words.append(words)
    return result


def limit_per_document(chunks: Sequence[SearchResult], *, max_per_doc: int) -> list[SearchResult]:
    """At most `max_per_doc` chunks of one document, so a single source cannot dominate."""
    doc_counts: dict[str, int] = {}
    result: list[SearchResult] = []
    for chunk in chunks:
        count = doc_counts.get(chunk.document_id, 0)
        if count < max_per_doc:
            result.append(chunk)
            doc_counts[chunk.document_id] = count + 1
    return result


async def apply_reranker(reranker: Reranker | None, *, query: str, results: list[SearchResult]) -> list[SearchResult]:
    """Rerank if a reranker is configured; without one, or if it fails, pass through unchanged."""
    if reranker is None:
        return results
    if not results:
        return results
    try:
        reranked = await reranker.rerank(query, list(results))
    except Exception as e:  # any failure of an optional stage degrades, never breaks the answer
        logger.warning(
            "reranker failed, results passed through unchanged: %s",
            e,
            extra={"event": "rerank_failed", "error": repr(e)},
        )
        return results
    # Only results that came in may go out: a reranker cannot add chunks the user may not see.
    allowed = {id(r) for r in results}
    kept = [r for r in reranked if id(r) in allowed]
    if len(kept) != len(reranked):
        logger.warning("reranker returned unknown results; they were dropped", extra={"event": "rerank_unknown"})
    return kept


async def get_quality_context(
    vector_service: Any,
    *,
    query: str,
    user_tags: Sequence[str],
    tenant_id: str,
    settings: RAGSettings,
    max_chunks: int = 5,
    reranker: Reranker | None = None,
    timings: dict[str, float] | None = None,
) -> list[SearchResult]:
    """Over-fetch min(3k, cap) candidates, drop those under the similarity floor that are no strong
    keyword match either (passes_floor), dedup, rerank (optional), limit per document, return the
    top k."""
    candidate_limit = min(max_chunks * 3, settings.rag_dedup_candidates_cap)
    candidates = await vector_service.search(
        query,
        user_tags=list(user_tags),
        tenant_id=tenant_id,  # tenant isolation is enforced inside the vector service
        limit=candidate_limit,
        score_threshold=0.0,  # filtered below, for more control
        timings=timings,
    )
    if not candidates:
        return []
    filtered = [c for c in candidates if passes_floor(c, query=query, min_score=settings.rag_min_similarity_score)]
    deduped = deduplicate_chunks(
        filtered,
        threshold=settings.rag_chunk_overlap_threshold,
        cap=settings.rag_dedup_candidates_cap,
    )
    reranked = await apply_reranker(reranker, query=query, results=deduped)
    limited = limit_per_document(reranked, max_per_doc=settings.rag_max_chunks_per_doc)
    return limited[:max_chunks]


def _topic_terms(text: str) -> list[str]:
    """Content words of a user turn, in order, without repeats."""
    words = _TERM_RE.findall(text.lower())
    return list(dict.fromkeys(w for w in words if w not in _TOPIC_NOISE and len(w) >= 3))


def _previous_user_turns(query: str, history: Sequence[ChatMessage]) -> list[str]:
    turns = [m.content for m in history if m.role == "user" and m.content.strip()]
    # A caller may include the current question as the last history message; it is not a topic.
    if turns and turns[-1].strip() == query.strip():
        turns.pop()
    return turns


def is_follow_up(query: str) -> bool:
    """Whether a question needs the conversation to be understood (asked after earlier turns).

    Deterministic and lexical: a continuation opener or a back-reference makes it a follow-up; so
    does having fewer than SELF_CONTAINED_TERMS topic words ("And for P2?", "When is the
    post-mortem due?"), unless it names the asker's own action and its object (_OWN_ACTION: "How
    do I contact the helpdesk?"). Otherwise the question stands alone and is a new topic, even if
    it shares a word with the old one: carrying "reset password" into "What is the parental leave
    policy for new fathers?" only pulls the search away from what was asked.
    """
    text = " ".join(query.lower().split())
    words = _TERM_RE.findall(text)
    if not words:
        return True
    if any(text == opener or text.startswith(opener + " ") for opener in _CONTINUATION_OPENERS):
        return True
    if any(w in _BACK_REFERENCES for w in words):
        return True
    terms = len(_topic_terms(query))
    if _OWN_ACTION.match(text) and terms >= ACTION_TERMS:
        return False
    return terms < SELF_CONTAINED_TERMS


def standalone_query(query: str) -> str | None:
    """The text build_retrieval_query gives for `query` whatever the conversation before it: the
    raw question when it is no follow-up; None when the history decides."""
    return None if is_follow_up(query) else query


def build_retrieval_query(*, query: str, history: Sequence[ChatMessage] | None) -> tuple[str, str]:
    """The text to embed and the strategy name.

    First message (no earlier topic): the raw question. A follow-up (is_follow_up): a standalone
    query made of the topic accumulated from the recent user turns plus the new question, so
    "does it cover contractors?" still finds the vacation policy. A question that stands on its
    own after earlier turns is a new topic: the raw question. Deterministic; no LLM round trip.
    """
    turns = _previous_user_turns(query, list(history or []))[-TOPIC_USER_TURNS:]
    topic: list[str] = []
    # Newest turn first, so when the cap bites it is the oldest topic that fades.
    for turn in reversed(turns):
        for term in _topic_terms(turn):
            if term not in topic:
                topic.append(term)
    topic = topic[:TOPIC_MAX_TERMS]
    if not topic:
        return query, STRATEGY_FIRST
    if standalone_query(query) is not None:
        return query, STRATEGY_NEW_TOPIC
    question_terms = set(_topic_terms(query))
    carried = [t for t in topic if t not in question_terms]
    if not carried:
        return query, STRATEGY_FOLLOW_UP
    return f"{' '.join(carried)}: {query.strip()}", STRATEGY_FOLLOW_UP
