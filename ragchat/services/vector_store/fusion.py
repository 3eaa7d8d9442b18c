"""Client-side reciprocal rank fusion of the search stages, with a deterministic tie-break.

Fused here rather than with the engine's Fusion.Rrf so that every tie is broken by point id, a
function of the chunk's source (R-RET-6): the same corpus and question give the same order on every
run and on either backend.

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from ragchat.services.types import SearchResult
from ragchat.services.vector_store.access import Conditions, allowed
from ragchat.services.vector_store.backend import Hit
from ragchat.services.vector_store.payload import search_result

logger = logging.getLogger(__name__)

RRF_K = 60


def rank(stage_hits: Sequence[Sequence[Hit]], *, dense_stage: int | None = 0) -> list[tuple[str, float | None]]:
    """Reciprocal rank fusion of the stages, with every tie broken by point id (R-RET-6): the point
    ids in fused order, each with its cosine similarity when the dense stage found it (None: only
    BM25 did; `results` computes it from the stored vector).

    A point id is a function of the chunk's source (document id and chunk index, `payload.point_id`),
    so ranking needs no payload: the stages return ids and scores only. Within a stage, hits are
    ranked by (-score, id) so equal scores get a stable order; the fused list is sorted by
    (-sum of 1/(k + rank), id). The access filter is checked again on the points `results` builds
    from, whose whole payload is fetched: the engine filtered already, that is defence in depth.
    """
    fused: dict[str, float] = {}
    cosine: dict[str, float] = {}
    for stage_index, hits in enumerate(stage_hits):
        if stage_index == dense_stage:
            for hit in hits:
                cosine[hit.id] = max(0.0, min(1.0, hit.score))
        ordered = sorted(hits, key=lambda h: (-round(h.score, 7), h.id))
        for position, hit in enumerate(ordered, start=1):
            fused[hit.id] = fused.get(hit.id, 0.0) + 1.0 / (RRF_K + position)
    order = sorted(fused, key=lambda pid: (-round(fused[pid], 12), pid))
    return [(pid, cosine.get(pid)) for pid in order]


def results(
    vector: Sequence[float], ranked: Sequence[tuple[str, float | None]], points: Sequence[Hit], conditions: Conditions
) -> list[SearchResult]:
    """The ranked ids as SearchResults, from their fetched points (whole payloads), re-checked
    against the access conditions; a hit only BM25 found is scored by the cosine of its stored dense
    vector. An id no longer stored (deleted meanwhile) is left out."""
    by_id = {point.id: point for point in points}
    missing = [pid for pid, score in ranked if score is None and pid in by_id]
    computed = dict(zip(missing, _cosines(vector, [by_id[pid].dense for pid in missing]), strict=True))
    out = []
    for pid, score in ranked:
        point = by_id.get(pid)
        if point is None:
            continue
        if not allowed(point.payload, conditions):
            logger.error("vector store returned a chunk outside the access filter: %s", pid)
            continue
        out.append(search_result(point.payload, score if score is not None else computed[pid]))
    return out


def _cosines(query: Sequence[float], vectors: Sequence[Sequence[float] | None]) -> list[float]:
    """Cosine similarity of the query with each vector, clamped to 0-1 (0 for a missing vector)."""
    if not vectors:
        return []
    q = np.asarray(query, dtype=np.float64)
    out = []
    q_norm = float(np.linalg.norm(q))
    for vector in vectors:
        if vector is None:
            out.append(0.0)
            continue
        v = np.asarray(vector, dtype=np.float64)
        denom = q_norm * float(np.linalg.norm(v))
        out.append(0.0 if denom == 0.0 else max(0.0, min(1.0, float(np.dot(q, v)) / denom)))
    return out
