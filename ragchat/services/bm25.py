"""BM25 sparse vectors for hybrid search (R-RET-3), computed in-process and identically for both backends.

Qdrant Edge ships a BM25 model (`qdrant_edge.Bm25`) that needs no server: documents get
term-frequency weights with (k, b, avg_len) length normalisation, queries get 1.0 per unique
token, and token ids are stable hashes. The collection's sparse vector uses Modifier.IDF so the
engine applies inverse document frequency at query time over the live corpus; the vectors
themselves are corpus-independent, so the embedded engine and a Qdrant server score alike.

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

from qdrant_edge import Bm25, Bm25Config

# Chunks are sized for a 256-word-piece window (~180 words); BM25's avg_len should be near that.
BM25_AVG_LEN = 180.0


@dataclass(frozen=True)
class SparseVec:
    indices: tuple[int, ...]
    values: tuple[float, ...]


_lock = threading.Lock()
_model: Bm25 | None = None


def _bm25() -> Bm25:
    global _model
    with _lock:
        if _model is None:
            _model = Bm25(Bm25Config(avg_len=BM25_AVG_LEN, language="english"))
        return _model


def _sorted(vector) -> SparseVec:
    # Sorted indices make the vectors byte-identical across runs and acceptable to any backend.
    pairs = sorted(zip(vector.indices, vector.values))
    return SparseVec(tuple(i for i, _ in pairs), tuple(float(v) for _, v in pairs))


def bm25_document(text: str) -> SparseVec:
    return _sorted(_bm25().embed_document(text))


def bm25_query(text: str) -> SparseVec:
    return _sorted(_bm25().embed_query(text))


def keyword_share(query: str, text: str) -> float:
    """Share of the query's BM25 terms (stemmed words, stopwords out) that `text` holds; 0.0 for a
    query without any. The same tokens the BM25 stage matches on, unweighted."""
    wanted = set(bm25_query(query).indices)
    if not wanted:
        return 0.0
    return len(wanted & set(bm25_document(text).indices)) / len(wanted)


def best_keyword_share(queries: Iterable[str], text: str) -> float | None:
    """The best keyword_share of `text` over `queries` (the question as asked, as searched); None
    when no query has a term to count."""
    held = set(bm25_document(text).indices)
    shares = []
    for query in dict.fromkeys(q for q in queries if q):
        wanted = set(bm25_query(query).indices)
        if wanted:
            shares.append(len(wanted & held) / len(wanted))
    return max(shares) if shares else None
