"""Token counting (R-CORE-5): synchronous, cached, calibrated from Ollama's usage counts; exact counts
only off the query path.

References: requirement IDs (R-…): docs/requirements.md; "spec v3": docs/specs/rag-service-spec-v3-FINAL.md.
"""

from __future__ import annotations

import pytest

from ragchat.fake_ollama import FakeOllama
from ragchat.services.budget import TokenBudget
from ragchat.services.config import RAGSettings
from ragchat.services.llm import OllamaLLM
from ragchat.services.tokens import Calibration, ExactCountCache, TokenCounter
from ragchat.services.types import ChatMessage, SearchResult

CHUNKS = [
    "Employees get twenty five days of paid vacation per year, plus public holidays.",
    "Travel expenses are reimbursed within thirty days when receipts are attached.",
    "The office is closed between Christmas and New Year; urgent issues go to on-call.",
    "Parental leave is sixteen weeks at full pay for every parent, adoptive parents included.",
    "Remote work is allowed up to three days a week after the probation period ends.",
]


def fresh_counter(model: str | None = "llama3.2", **kwargs) -> TokenCounter:
    return TokenCounter(model, calibration=Calibration(), exact_cache=ExactCountCache(), **kwargs)


def test_uncalibrated_estimate_is_len_over_4() -> None:
    counter = fresh_counter()
    assert counter.count("") == 0
    assert counter.count("abcd") == 1
    assert counter.count("a" * 400) == 100
    assert counter.count("abcde") == 2  # rounded up: never under-count a budget
    assert not counter.is_calibrated


def test_counting_a_five_chunk_question_makes_no_llm_round_trip_spec_v3_defect_fix(
    fake_ollama: FakeOllama,
) -> None:
    """Spec v3 defect fix: spec v3 counted each text with one /api/generate call, i.e. several LLM
    round trips on every question. Counting the whole prompt here sends zero requests."""
    counter = TokenCounter("llama3.2", base_url=fake_ollama.url)
    budget = TokenBudget("llama3.2", RAGSettings())
    results = [
        SearchResult(
            document_id=f"550e8400-e29b-41d4-a716-44665544000{i}",
            chunk_index=i,
            document_name="handbook.pdf",
            chunk_text=text,
            score=0.9 - i / 10,
        )
        for i, text in enumerate(CHUNKS)
    ]
    history = [ChatMessage(role="user", content="Hi"), ChatMessage(role="assistant", content="Hello")]
    budget.allocate("You answer from the context. Question: how much leave?", history, results, counter.count)
    for text in CHUNKS:
        assert counter.count(text) > 0
    assert fake_ollama.requests == []


async def test_calibration_from_real_generation_usage(fake_ollama: FakeOllama) -> None:
    calibration = Calibration()
    llm = OllamaLLM(RAGSettings(ollama_base_url=fake_ollama.url), calibration=calibration)
    counter = TokenCounter("llama3.2", calibration=calibration, exact_cache=ExactCountCache())
    text = " ".join(CHUNKS) * 2
    before = counter.count(text)
    assert before == -(-len(text) // 4)
    async for _ in llm.stream(messages=[ChatMessage(role="user", content=text)], model="llama3.2"):
        pass
    assert counter.is_calibrated
    true_tokens = fake_ollama.count_tokens(text)
    # The learned ratio brings the estimate much closer to the model's own count than len/4 was.
    assert abs(counter.count(text) - true_tokens) < abs(before - true_tokens)
    assert abs(counter.count(text) - true_tokens) / true_tokens < 0.05
    assert len(fake_ollama.requests) == 1  # the generation itself, nothing more


def test_calibration_ignores_implausible_observations() -> None:
    calibration = Calibration()
    assert not calibration.observe("llama3.2", chars=50, tokens=12)  # too small to trust
    assert not calibration.observe("llama3.2", chars=1000, tokens=20)  # KV-cache reuse artefact
    assert not calibration.observe("llama3.2", chars=1000, tokens=None)
    assert calibration.ratio("llama3.2") is None
    assert calibration.observe("llama3.2", chars=1000, tokens=300)
    assert calibration.ratio("llama3.2") == pytest.approx(1000 / 300)
    assert calibration.ratio(None) == pytest.approx(1000 / 300)  # pooled, for model-less counters


async def test_prefetch_exact_then_count_is_exact_and_cached(fake_ollama: FakeOllama) -> None:
    counter = fresh_counter(base_url=fake_ollama.url)
    fetched = await counter.prefetch_exact(CHUNKS + CHUNKS[:2])
    assert fetched == len(CHUNKS)  # duplicates asked once
    requests = fake_ollama.requests_to("/api/generate")
    assert len(requests) == len(CHUNKS)
    assert all(r.options["num_predict"] == 0 and r.body["raw"] is True for r in requests)
    for text in CHUNKS:
        assert counter.count(text) == fake_ollama.count_tokens(text)
    assert await counter.prefetch_exact(CHUNKS) == 0  # already cached
    assert len(fake_ollama.requests_to("/api/generate")) == len(CHUNKS)
    # Exact counts are per model: another model's counter only gets the estimate.
    other = TokenCounter("qwen3:8b", calibration=Calibration(), exact_cache=counter.exact_cache)
    assert other.count(CHUNKS[0]) == -(-len(CHUNKS[0]) // 4)


async def test_prefetch_exact_failure_keeps_estimate(fake_ollama: FakeOllama) -> None:
    counter = fresh_counter(base_url=fake_ollama.url)
    fake_ollama.refuse_connections()
    assert await counter.prefetch_exact(CHUNKS[:1]) == 0
    assert counter.count(CHUNKS[0]) == -(-len(CHUNKS[0]) // 4)


def test_exact_cache_is_bounded() -> None:
    cache = ExactCountCache(max_entries=2)
    cache.put(("m", "a"), 1)
    cache.put(("m", "b"), 2)
    assert cache.get(("m", "a")) == 1  # refreshes "a"
    cache.put(("m", "c"), 3)
    assert cache.get(("m", "b")) is None and cache.get(("m", "a")) == 1 and len(cache) == 2
