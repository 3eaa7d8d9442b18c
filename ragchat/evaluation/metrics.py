"""Ranking metrics over document-level relevance (binary), and the support check.

A search returns chunks; the ranked list of documents is the order in which documents first
appear among them (a document's best chunk decides its rank).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

_SPACE_RE = re.compile(r"\s+")


def ranked_documents(chunk_documents: Iterable[str]) -> list[str]:
    """Documents in the order their first chunk appears, without repeats."""
    return list(dict.fromkeys(chunk_documents))


def recall_at(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    if not relevant:
        return 0.0
    return len(set(ranked[:k]) & relevant) / len(relevant)


def reciprocal_rank(ranked: Sequence[str], relevant: set[str]) -> float:
    for position, document in enumerate(ranked, start=1):
        if document in relevant:
            return 1.0 / position
    return 0.0


def ndcg_at(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    """Binary-relevance nDCG: DCG of the ranking over the DCG of a perfect one."""
    dcg = sum(1.0 / math.log2(i + 2) for i, doc in enumerate(ranked[:k]) if doc in relevant)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(relevant), k)))
    return dcg / ideal if ideal else 0.0


def normalise(text: str) -> str:
    """Lowercase with runs of whitespace as one space (PDF extraction breaks lines anywhere)."""
    return _SPACE_RE.sub(" ", text).strip().lower()


def has_support(chunk_texts: Iterable[str], phrases: Sequence[str]) -> bool:
    """True if any chunk contains any phrase (case- and whitespace-insensitive)."""
    wanted = [normalise(p) for p in phrases if p.strip()]
    return any(phrase in normalise(text) for text in chunk_texts for phrase in wanted)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
