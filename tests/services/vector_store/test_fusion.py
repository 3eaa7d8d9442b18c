"""Client-side RRF: deterministic ties, cosine scores, and hits outside the access filter dropped
(ranked on the ids and scores the stages return, then built from the fetched points)."""

from __future__ import annotations

import pytest

from ragchat.services.vector_store.access import access_conditions
from ragchat.services.vector_store.backend import Hit
from ragchat.services.vector_store.fusion import rank, results
from ragchat.services.vector_store.payload import point_id

CONDITIONS = access_conditions(user_tags=[], tenant_id="default")


def hit(doc: str, score: float, *, chunk=0, tags=("public",), dense=None) -> Hit:
    payload = {"document_id": doc, "chunk_index": chunk, "tags": list(tags), "tenant_id": "default"}
    return Hit(point_id(doc, chunk), score, payload, dense)


def fuse(vector, stage_hits, conditions):
    """What a search does: rank on the ids and scores the stages return, then results from the
    whole points."""
    slim = [[Hit(h.id, h.score, {}) for h in hits] for hits in stage_hits]
    points = {h.id: h for hits in stage_hits for h in hits}
    for hits in stage_hits:  # the stored point: its dense vector wherever a stage saw it
        for h in hits:
            if h.dense is not None:
                points[h.id] = h
    return results(vector, rank(slim), list(points.values()), conditions)


def test_equal_scores_are_ordered_by_point_id_whatever_the_engine_order():
    dense = [hit(doc, 0.5, chunk=chunk) for doc in "bac" for chunk in (1, 0)]
    results = fuse([1.0, 0.0], [dense], CONDITIONS)
    by_id = sorted(dense, key=lambda h: h.id)
    assert [(r.document_id, r.chunk_index) for r in results] == [
        (h.payload["document_id"], h.payload["chunk_index"]) for h in by_id
    ]
    assert fuse([1.0, 0.0], [list(reversed(dense))], CONDITIONS) == results


def test_fused_order_sums_reciprocal_ranks_and_scores_stay_cosine():
    dense = [hit("a", 0.9), hit("b", 0.8)]
    keyword = [hit("b", 7.0, dense=[1.0, 0.0]), hit("c", 6.0, dense=[0.0, 1.0])]
    results = fuse([1.0, 0.0], [dense, keyword], CONDITIONS)
    # b is in both stages: 1/(k+2) + 1/(k+1) beats a's 1/(k+1)
    assert [r.document_id for r in results] == ["b", "a", "c"]
    assert [r.score for r in results] == [pytest.approx(0.8), pytest.approx(0.9), pytest.approx(0.0)]


def test_a_hit_outside_the_access_filter_never_comes_back():
    dense = [hit("a", 0.9, tags=("hr",)), hit("b", 0.8)]
    assert [r.document_id for r in fuse([1.0], [dense], CONDITIONS)] == ["b"]


def test_ranking_reads_no_payload():
    ranked = rank([[Hit("p2", 0.5, {}), Hit("p1", 0.5, {}), Hit("p3", 0.9, {})]])
    assert ranked == [("p3", 0.9), ("p1", 0.5), ("p2", 0.5)]


def test_a_point_changed_between_ranking_and_fetching_is_checked_again():
    ranked = rank([[hit("a", 0.9), hit("b", 0.8)]])
    # a lost its public tag, b was deleted meanwhile: neither comes back.
    assert results([1.0], ranked, [hit("a", 0.0, tags=("hr",))], CONDITIONS) == []
