"""Embedders: the offline local model, Ollama through the fake server, hashing, and the cache."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

import pytest

from ragchat.services.config import RAGSettings
from ragchat.services.embeddings import (
    CachedEmbedder,
    Embedder,
    HashingEmbedder,
    LocalEmbedder,
    OllamaEmbedder,
    QueryBatcher,
    build_embedder,
)
from ragchat.services.errors import EmbeddingError


def norm(vector: Sequence[float]) -> float:
    return math.sqrt(sum(x * x for x in vector))


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b))


class CountingEmbedder:
    """A test double of the Embedder protocol that records every text it is asked to embed."""

    model_name = "counting-3"
    dimension = 3

    def __init__(self) -> None:
        self.documents: list[str] = []
        self.queries: list[str] = []

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.documents.extend(texts)
        return [[float(len(t)), 1.0, 0.0] for t in texts]

    async def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return [float(len(text)), 0.0, 1.0]


async def test_cache_never_embeds_the_same_text_twice():
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, max_size=100)
    first = await cached.embed_documents(["alpha", "beta", "alpha"])
    second = await cached.embed_documents(["beta", "gamma"])
    assert inner.documents == ["alpha", "beta", "gamma"]
    assert first[0] == first[2] == [5.0, 1.0, 0.0] and second[0] == first[1]
    # Query and document embeddings of the same text are different entries.
    assert await cached.embed_query("alpha") == [5.0, 0.0, 1.0]
    assert await cached.embed_query("alpha") == [5.0, 0.0, 1.0]
    assert inner.queries == ["alpha"]
    assert cached.hits == 2 and cached.model_name == "counting-3" and cached.dimension == 3


class SlowCountingEmbedder(CountingEmbedder):
    """Each query takes until `release` is set, so callers overlap; `fail` makes them fail."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.fail = False

    async def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        await self.release.wait()
        if self.fail:
            raise EmbeddingError("model gone")
        return [float(len(text)), 0.0, 1.0]


async def test_the_same_query_asked_while_it_is_embedded_shares_the_one_model_call():
    inner = SlowCountingEmbedder()
    cached = CachedEmbedder(inner, max_size=100)
    ahead = asyncio.create_task(cached.embed_query("vacation policy"))  # RAGService.embed_ahead
    gives_up = asyncio.create_task(cached.embed_query("vacation policy"))  # a tab closed meanwhile
    search = asyncio.create_task(cached.embed_query("vacation policy"))
    other = asyncio.create_task(cached.embed_query("parking"))
    await asyncio.sleep(0)
    gives_up.cancel()
    await asyncio.sleep(0)
    inner.release.set()
    assert await ahead == await search == [15.0, 0.0, 1.0] and await other == [7.0, 0.0, 1.0]
    assert gives_up.cancelled()
    assert sorted(inner.queries) == ["parking", "vacation policy"]
    assert await cached.embed_query("vacation policy") == [15.0, 0.0, 1.0] and len(inner.queries) == 2


async def test_a_shared_query_call_that_fails_fails_its_callers_and_the_next_call_tries_again():
    inner = SlowCountingEmbedder()
    cached = CachedEmbedder(inner, max_size=100)
    inner.fail = True
    calls = [asyncio.create_task(cached.embed_query("badge")) for _ in range(2)]
    await asyncio.sleep(0)
    inner.release.set()
    for call in calls:
        with pytest.raises(EmbeddingError):
            await call
    assert inner.queries == ["badge"]
    inner.fail = False
    assert await cached.embed_query("badge") == [5.0, 0.0, 1.0] and inner.queries == ["badge", "badge"]


async def test_cache_evicts_least_recently_used():
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, max_size=2)
    await cached.embed_documents(["a", "b"])
    await cached.embed_documents(["a"])  # a is now the most recent
    await cached.embed_documents(["c"])  # evicts b
    await cached.embed_documents(["a", "b"])
    assert inner.documents == ["a", "b", "c", "b"]
    assert cached.size == 2


async def test_cache_key_includes_the_model():
    a, b = CountingEmbedder(), CountingEmbedder()
    b.model_name = "counting-other"
    cached_a = CachedEmbedder(a)
    cached_b = CachedEmbedder(b)
    await cached_a.embed_documents(["same"])
    await cached_b.embed_documents(["same"])
    assert a.documents == b.documents == ["same"]
    assert cached_a._key("document", "same") != cached_b._key("document", "same")


async def test_hashing_embedder_is_deterministic_and_normalised():
    embedder = HashingEmbedder()
    assert isinstance(embedder, Embedder)
    assert embedder.model_name == "hashing-384" and embedder.dimension == 384
    one = await embedder.embed_query("Expense reports need receipts")
    two = (await embedder.embed_documents(["Expense reports need receipts"]))[0]
    other = await embedder.embed_query("The VPN gateway needs two factors")
    assert one == two and len(one) == 384
    assert norm(one) == pytest.approx(1.0)
    assert dot(one, other) < 0.5
    assert dot(one, await embedder.embed_query("expense reports")) > 0.3


def test_build_embedder_by_setting(ollama_url):
    assert build_embedder(RAGSettings(embedding_backend="hashing")).model_name == "hashing-384"
    local = build_embedder(RAGSettings())
    assert isinstance(local, CachedEmbedder) and isinstance(local.inner, QueryBatcher)
    assert isinstance(local.inner.inner, LocalEmbedder) and local.inner.max_batch == 64
    ollama = build_embedder(
        RAGSettings(embedding_backend="ollama", embedding_model="nomic-embed-text", ollama_base_url=ollama_url)
    )
    assert isinstance(ollama.inner.inner, OllamaEmbedder) and ollama.model_name == "nomic-embed-text"
    with pytest.raises(ValueError, match="EMBEDDING_BACKEND"):
        build_embedder(RAGSettings(embedding_backend="word2vec"))


@pytest.mark.slow  # first load imports torch: ~6 s on 2 cores
async def test_local_embedder_offline_384_normalised(monkeypatch):
    # Any attempt to reach the Hub would fail here rather than hang.
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    embedder = LocalEmbedder(batch_size=8)
    docs = await embedder.embed_documents(
        ["Employees get twenty five vacation days per year.", "The VPN requires two factor authentication."]
    )
    query = await embedder.embed_query("How many days of holiday do I get?")
    assert len(query) == 384 and all(len(d) == 384 for d in docs)
    assert norm(query) == pytest.approx(1.0, abs=1e-4)
    assert dot(query, docs[0]) > dot(query, docs[1])  # semantic, not lexical: "holiday" vs "vacation"
    assert embedder.count_tokens("Hello world") == 2
    assert embedder.count_tokens("word " * 300) == 300


async def test_local_embedder_does_not_block_the_event_loop():
    embedder = LocalEmbedder(batch_size=8)
    await embedder.embed_query("warm up")
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.001)
            ticks += 1

    task = asyncio.create_task(ticker())
    await embedder.embed_documents(["a long enough sentence to take some milliseconds " * 20] * 32)
    task.cancel()
    assert ticks > 0


async def test_ollama_embedder_prefixes_batches_and_discovers_dimension(fake_ollama):
    embedder = OllamaEmbedder(model="nomic-embed-text", base_url=fake_ollama.url, batch_size=2)
    assert embedder.dimension == 0
    vectors = await embedder.embed_documents(["one", "two", "three"])
    assert embedder.dimension == 768 and len(vectors) == 3
    assert norm(vectors[0]) == pytest.approx(1.0)
    query = await embedder.embed_query("one")
    inputs = [r.body["input"] for r in fake_ollama.requests_to("/api/embed")]
    assert inputs[:2] == [["search_document: one", "search_document: two"], ["search_document: three"]]
    assert inputs[2] in ("search_query: one", ["search_query: one"])
    assert len(query) == 768


def test_ollama_embedder_works_on_one_event_loop_after_another(fake_ollama):
    """Commands (ingest_folder, sync_folder) run each file on an event loop of their own: the
    second file's embedding failed with "Event loop is closed" while one client served every loop."""
    embedder = OllamaEmbedder(model="nomic-embed-text", base_url=fake_ollama.url)
    first = asyncio.run(embedder.embed_documents(["first file"]))
    second = asyncio.run(embedder.embed_documents(["second file"]))
    query = asyncio.run(embedder.embed_query("a question"))
    assert len(first[0]) == len(second[0]) == len(query) == 768


async def test_ollama_embedder_without_prefix_for_other_models(fake_ollama):
    fake_ollama.models(["all-minilm", "nomic-embed-text"])
    fake_ollama.embedding_dimension(384, model="all-minilm")
    embedder = OllamaEmbedder(model="all-minilm", base_url=fake_ollama.url)
    await embedder.embed_documents(["plain"])
    assert embedder.dimension == 384
    assert fake_ollama.requests_to("/api/embed")[-1].body["input"] == ["plain"]


async def test_ollama_embedder_retries_transient_errors(fake_ollama):
    fake_ollama.fail_with(503, times=2, paths=("/api/embed",))
    embedder = OllamaEmbedder(
        model="nomic-embed-text", base_url=fake_ollama.url, retry_initial_delay=0.01, retry_max_delay=0.02
    )
    vector = await embedder.embed_query("hello")
    assert len(vector) == 768
    assert len(fake_ollama.requests_to("/api/embed")) == 3


async def test_ollama_embedder_gives_up_with_embedding_error(fake_ollama):
    fake_ollama.fail_with(500, times=None, paths=("/api/embed",))
    embedder = OllamaEmbedder(
        model="nomic-embed-text", base_url=fake_ollama.url, retry_attempts=2, retry_initial_delay=0.01
    )
    with pytest.raises(EmbeddingError, match="nomic-embed-text"):
        await embedder.embed_documents(["hello"])
    assert len(fake_ollama.requests_to("/api/embed")) == 3


# ---------------------------------------------------------------- concurrent queries, one model call


class BatchCountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting calls; each batch takes `seconds` (a model at work)."""

    def __init__(self, seconds: float = 0.02, fail: bool = False) -> None:
        super().__init__()
        self.calls: list[list[str]] = []
        self.seconds, self.fail = seconds, fail

    async def embed_queries(self, texts):
        self.calls.append(list(texts))
        await asyncio.sleep(self.seconds)
        if self.fail:
            raise EmbeddingError("model crashed")
        return await super().embed_queries(texts)


async def test_a_burst_of_questions_shares_model_calls():
    inner = BatchCountingEmbedder()
    batcher = QueryBatcher(inner, max_batch=64)
    # One question finds the model idle: embedded at once, alone.
    alone = await batcher.embed_query("vacation days")
    assert alone == inner.embed_sync("vacation days") and inner.calls == [["vacation days"]]
    # 200 at once: the first goes alone, the rest in batches of at most 64, each vector its own.
    texts = [f"question number {i}" for i in range(200)]
    vectors = await asyncio.gather(*(batcher.embed_query(t) for t in texts))
    assert vectors == [inner.embed_sync(t) for t in texts]
    sizes = [len(c) for c in inner.calls[1:]]
    assert sum(sizes) == 200 and max(sizes) == 64 and len(sizes) <= 5
    # The same question asked twice in one batch is embedded once.
    inner.calls.clear()
    a, b = await asyncio.gather(batcher.embed_query("same"), batcher.embed_query("same"))
    assert a == b and sum(len(c) for c in inner.calls) == 1


async def test_a_failed_batch_fails_its_callers_and_the_next_one_works():
    inner = BatchCountingEmbedder(fail=True)
    batcher = QueryBatcher(inner)
    results = await asyncio.gather(*(batcher.embed_query(f"q{i}") for i in range(5)), return_exceptions=True)
    assert all(isinstance(r, EmbeddingError) for r in results)
    inner.fail = False
    assert await batcher.embed_query("again") == inner.embed_sync("again")


async def test_a_caller_that_gives_up_leaves_the_others_their_answers():
    inner = BatchCountingEmbedder(seconds=0.05)
    batcher = QueryBatcher(inner)
    first = asyncio.ensure_future(batcher.embed_query("first"))
    await asyncio.sleep(0)  # the first batch is running; the next two wait for it
    closed_tab = asyncio.ensure_future(batcher.embed_query("closed tab"))
    kept = asyncio.ensure_future(batcher.embed_query("kept"))
    await asyncio.sleep(0)
    closed_tab.cancel()
    assert await kept == inner.embed_sync("kept") and await first == inner.embed_sync("first")
    assert ["kept"] in inner.calls  # the cancelled question was not embedded


def test_batches_are_per_event_loop():
    # Each loop (a test, a worker thread's loop) gets its own queue: no future crosses loops.
    inner = BatchCountingEmbedder(seconds=0.0)
    batcher = QueryBatcher(inner)
    for _ in range(2):
        assert asyncio.run(batcher.embed_query("x")) == inner.embed_sync("x")


async def test_the_local_model_embeds_a_batch_like_single_queries():
    local = LocalEmbedder()
    texts = ["How many vacation days do I get?", "Who approves travel expenses?"]
    together = await local.embed_queries(texts)
    alone = [await local.embed_query(t) for t in texts]
    assert all(abs(x - y) < 1e-5 for a, b in zip(together, alone, strict=True) for x, y in zip(a, b, strict=True))
