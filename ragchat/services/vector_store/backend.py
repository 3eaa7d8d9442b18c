"""The small interface both stores implement, and the neutral query model they translate.

A backend knows its engine (Qdrant Edge in-process, or a Qdrant server through qdrant-client) and
nothing about access rules or fusion: it runs the stages it is given, each with its own filter.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from ragchat.services.bm25 import SparseVec
from ragchat.services.vector_store.access import Conditions
from ragchat.services.vector_store.payload import PointData

# Dense search with an access filter (issue 17). An HNSW graph built over every chunk serves a tag
# filter poorly: on the bench's 90k chunks it returned 64 % of the exact filtered top 10. Both
# stores therefore (1) let the query planner scan exactly whenever the filter leaves at most
# EXACT_SEARCH_MAX_POINTS chunks (Qdrant's full_scan_threshold, in kilobytes of vectors; the
# keyword payload indexes are made with the collection, before any graph, so the planner knows the
# filter's cardinality), and (2) search bigger filtered sets with a wider beam (hnsw_ef).
#
# A settled index (see `settle()`) also keeps (3) a compressed copy of every dense vector in memory,
# scanned first, then DENSE_OVERSAMPLING x limit candidates rescored with the full vectors, and (4)
# DENSE_SEGMENTS segments. The embedded store compresses with TurboQuant at
# DENSE_QUANTIZED_BITS bits per dimension (the vector rotated at random, then each coordinate
# quantized on its own). On the bench's 100k chunks in one process, p95 3.6-4.4 ms at recall@10
# 1.000 on one box and 5.7-6.4 ms at 0.999 on another, where 8-bit scalar copies took 4.3-5.9 and
# 6.2-8.5 ms at 0.998 (docs/performance.md "Filtered search"). The Qdrant server of compose.yaml (v1.15)
# has no TurboQuant and keeps the 8-bit scalar copies.
EXACT_SEARCH_MAX_POINTS = 100_000
DENSE_HNSW_EF = 128
HNSW_M = 16
HNSW_EF_CONSTRUCT = 100
DENSE_OVERSAMPLING = 2.0
DENSE_QUANTIZED_BITS = 4
DENSE_SEGMENTS = 2
# Threads of one embedded-store search (Edge's max_search_threads): one, which goes through the
# segments one after the other. With TurboQuant copies a second thread no longer pays for itself
# alone (one process, the dense stage's p50 / p95: at 10k chunks 0.55 / 0.76-0.79 ms with
# one thread, 0.70-0.74 / 0.92-1.17 ms with two; at 100k 3.93-3.99 / 5.90-6.18 against 4.10-4.22 /
# 5.84-6.60 ms), and in a burst of questions, where the other core runs the embedding model, the
# searches took less of the event loop with one (docs/performance.md "Bursts: one event loop").
SEARCH_THREADS = 1
# The BM25 stage with an access filter: Qdrant scans the filtered chunks one by one
# ("plain" search) when a segment holds fewer than its full_scan_threshold of them (default 5,000
# chunks), and walks the inverted index, checking the filter on each posting, above it. Both give
# the same results (sparse search is exact either way: the same top 50 on 10k and 100k chunks, a
# score at most different in its last float digits, as the plans add the terms up in another
# order; `test_the_bm25_stage_finds_the_same_by_its_index_as_by_a_scan`). But the scan costs about
# 0.2 us a chunk, and the walk grows with the posting lists: on the bench's 10k chunks (two
# segments of 5k, so every filter fell under 5,000) the stage took 0.28-1.00 ms by scan against
# 0.12-0.17 ms by the index, for every kind of reader (0, 1 or 2 tags, the small tenant); at 100k
# the index took 0.9 ms and a scan 9 ms. Only a filter that leaves very few chunks in a segment (a
# scan of 500 takes about 0.1 ms) is scanned now. The threshold belongs to each segment's index,
# made when the segment is built: a store made before keeps its scan until it is rebuilt from its
# points (docs/performance.md, "Filtered search").
SPARSE_FULL_SCAN_MAX_POINTS = 500


def full_scan_threshold_kb(dimension: int) -> int:
    """Qdrant's full_scan_threshold for EXACT_SEARCH_MAX_POINTS float32 vectors of `dimension`."""
    return max(10_000, EXACT_SEARCH_MAX_POINTS * max(1, dimension) * 4 // 1024)


class Hit(NamedTuple):
    """One point a stage found or a fetch returned (a tuple: a search makes a hundred of them, and
    a frozen dataclass took several times as long to build)."""

    id: str
    score: float  # the stage's own score (RRF for hybrid, cosine for dense)
    payload: dict[str, Any]
    dense: list[float] | None = None


@dataclass(frozen=True)
class Stage:
    """One retrieval stage: nearest neighbours by the dense vector or by the BM25 sparse vector."""

    using: str  # DENSE or SPARSE
    vector: list[float] | SparseVec
    conditions: Conditions
    limit: int
    exact: bool = False  # dense: scan every filtered chunk (the reference recall is measured against)
    # The payload keys returned with each hit; None: the whole payload, (): none. A search ranks
    # its stages' hits on ids and scores, then fetches the whole payload of the ones it returns
    # (Backend.fetch).
    keys: tuple[str, ...] | None = None


@dataclass(frozen=True)
class CollectionMeta:
    embedding_model: str
    dimension: int

    def as_dict(self) -> dict[str, Any]:
        return {"embedding_model": self.embedding_model, "dimension": self.dimension}


class Backend(Protocol):
    name: str

    async def open(self, meta: CollectionMeta) -> CollectionMeta | None:
        """Create the collection and indexes if missing; return what an existing one was built with."""

    async def upsert(self, points: Sequence[PointData]) -> None: ...

    async def delete(self, conditions: Conditions) -> None: ...

    async def set_payload(self, conditions: Conditions, payload: dict[str, Any]) -> None: ...

    async def count(self, conditions: Conditions) -> int: ...

    async def distinct_count(self, key: str) -> int: ...

    async def search_stages(self, stages: Sequence[Stage]) -> list[list[Hit]]:
        """Run the stages as one batch; each stage carries (and must apply) its own filter."""

    async def fetch(self, ids: Sequence[str], *, with_dense: bool = False) -> list[Hit]:
        """The stored points with these ids (whole payload; the dense vector too `with_dense`), score 0;
        ids no longer stored are left out. No filter: callers re-check what they return."""

    async def settle(self) -> None:
        """Finish what the engine builds lazily (segments, compressed vectors, graphs)."""
        ...

    def export(self, batch_size: int) -> AsyncIterator[list[PointData]]:
        """Every stored point (vectors and payload), in batches: what a backup writes."""
        ...

    async def drop(self) -> None:
        """Delete the collection and its metadata (restore, reindex); `open()` creates it anew."""

    async def close(self) -> None: ...
