"""Client-side RRF: deterministic ties, cosine scores, and hits outside the access filter dropped."""

from __future__ import annotations

import pytest

from ragchat.services.vector_store.access import access_conditions
from ragchat.services.vector_store.backend import Hit
from ragchat.services.vector_store.fusion import fuse

CONDITIONS = access_conditions(user_tags=[], tenant_id="default")


def hit(point: str, doc: str, score: float, *, tags=("public",), dense=None) -> Hit:
    payload = {"document_id": doc, "chunk_index": 0, "tags": list(tags), "tenant_id": "default", "chunk_text": point}
    return Hit(point, score, payload, dense)


def test_equal_scores_are_ordered_by_source_id_whatever_the_engine_order():
    dense = [hit("p2", "b", 0.5), hit("p1", "a", 0.5), hit("p3", "c", 0.5)]
    results = fuse([1.0, 0.0], [dense], CONDITIONS)
    assert [r.document_id for r in results] == ["a", "b", "c"]
    assert fuse([1.0, 0.0], [list(reversed(dense))], CONDITIONS) == results


def test_fused_order_sums_reciprocal_ranks_and_scores_stay_cosine():
    dense = [hit("p1", "a", 0.9), hit("p2", "b", 0.8)]
    keyword = [hit("p2", "b", 7.0, dense=[1.0, 0.0]), hit("p3", "c", 6.0, dense=[0.0, 1.0])]
    results = fuse([1.0, 0.0], [dense, keyword], CONDITIONS)
    # b is in both stages: 1/(k+2) + 1/(k+1) beats a's 1/(k+1)
    assert [r.document_id for r in results] == ["b", "a", "c"]
    assert [r.score for r in results] == [pytest.approx(0.8), pytest.approx(0.9), pytest.approx(0.0)]


def test_a_hit_outside_the_access_filter_never_comes_back():
    dense = [hit("p1", "a", 0.9, tags=("hr",)), hit("p2", "b", 0.8)]
    assert [r.document_id for r in fuse([1.0], [dense], CONDITIONS)] == ["b"]
