"""Client-side RRF: deterministic ties, cosine scores, and hits outside the access filter dropped
(ranked on the few payload keys the stages return, then built from the fetched points)."""

from __future__ import annotations

import pytest

from ragchat.services.vector_store.access import access_conditions
from ragchat.services.vector_store.backend import Hit
from ragchat.services.vector_store.fusion import rank, rank_keys, results

CONDITIONS = access_conditions(user_tags=[], tenant_id="default")


def hit(point: str, doc: str, score: float, *, tags=("public",), dense=None) -> Hit:
    payload = {"document_id": doc, "chunk_index": 0, "tags": list(tags), "tenant_id": "default", "chunk_text": point}
    return Hit(point, score, payload, dense)


def fuse(vector, stage_hits, conditions):
    """What a search does: rank on the keys the stages return, then results from the whole points."""
    keys = rank_keys(conditions)
    slim = [
        [Hit(h.id, h.score, {k: h.payload[k] for k in keys if k in h.payload}) for h in hits] for hits in stage_hits
    ]
    points = {h.id: h for hits in stage_hits for h in hits}
    for hits in stage_hits:  # the stored point: its dense vector wherever a stage saw it
        for h in hits:
            if h.dense is not None:
                points[h.id] = h
    return results(vector, rank(slim, conditions), list(points.values()), conditions)


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


def test_ranking_needs_only_the_tie_break_and_the_access_keys():
    assert rank_keys(CONDITIONS) == ("document_id", "chunk_index", "tenant_id", "tags")
    strict = access_conditions(user_tags=["hr"], tenant_id="default", cite_needs_review=False)
    assert rank_keys(strict)[-1] == "knowledge_status"


def test_a_point_changed_between_ranking_and_fetching_is_checked_again():
    ranked = rank([[hit("p1", "a", 0.9), hit("p2", "b", 0.8)]], CONDITIONS)
    # p1 lost its public tag, p2 was deleted meanwhile: neither comes back.
    assert results([1.0], ranked, [hit("p1", "a", 0.0, tags=("hr",))], CONDITIONS) == []
