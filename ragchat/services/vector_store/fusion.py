"""Client-side reciprocal rank fusion of the search stages, with a deterministic tie-break.

Fused here rather than with the engine's Fusion.Rrf so that every tie is broken by source id
(R-RET-6): the same corpus and question give the same order on every run and on either backend.

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragchat.services.types import SearchResult
from ragchat.services.vector_store.access import Conditions, allowed
from ragchat.services.vector_store.backend import Hit
from ragchat.services.vector_store.payload import search_result

logger = logging.getLogger(__name__)

RRF_K = 60


def fuse(
    vector: list[float],
    stage_hits: Sequence[Sequence[Hit]],
    conditions: Conditions,
    *,
    dense_stage: int | None = 0,
) -> list[SearchResult]:
    """Reciprocal rank fusion of the stages, with every tie broken by source id (R-RET-6).

    Within a stage, hits are ranked by (-score, source id) so equal scores get a stable order;
    the fused list is sorted by (-sum of 1/(k + rank), source id). Each result's score is its
    cosine similarity: the dense stage's own score (Qdrant cosine) or, for a hit only the BM25
    stage found, computed from its stored dense vector.
    """
    query = np.asarray(vector, dtype=np.float64)
    fused: dict[str, float] = {}
    cosine: dict[str, float] = {}
    payloads: dict[str, dict[str, Any]] = {}
    keys: dict[str, tuple[str, int]] = {}
    for stage_index, hits in enumerate(stage_hits):
        admitted = []
        for hit in hits:
            if not allowed(hit.payload, conditions):
                logger.error("vector store returned a chunk outside the access filter: %s", hit.id)
                continue
            keys[hit.id] = (str(hit.payload.get("document_id", "")), int(hit.payload.get("chunk_index", 0)))
            payloads[hit.id] = hit.payload
            if stage_index == dense_stage:
                cosine[hit.id] = max(0.0, min(1.0, hit.score))
            elif hit.id not in cosine:
                cosine[hit.id] = _cosine(query, hit.dense, 0.0)
            admitted.append(hit)
        admitted.sort(key=lambda h: (-round(h.score, 7), keys[h.id]))
        for rank, hit in enumerate(admitted, start=1):
            fused[hit.id] = fused.get(hit.id, 0.0) + 1.0 / (RRF_K + rank)
    order = sorted(fused, key=lambda pid: (-round(fused[pid], 12), keys[pid]))
    return [search_result(payloads[pid], cosine[pid]) for pid in order]


def _cosine(query: np.ndarray, vector: Sequence[float] | None, fallback: float) -> float:
    if vector is None:
        return max(0.0, min(1.0, fallback))
    v = np.asarray(vector, dtype=np.float64)
    denom = float(np.linalg.norm(query) * np.linalg.norm(v))
    if denom == 0.0:
        return 0.0
    return max(0.0, min(1.0, float(np.dot(query, v)) / denom))
