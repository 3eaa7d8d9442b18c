"""Embedders: turn text into dense vectors (R-RET-8) behind one small protocol, plus a cache (R-RET-5).

- LocalEmbedder: all-MiniLM-L6-v2, offline, CPU, on ONNX Runtime (int8 by default).
- OllamaEmbedder: Ollama's /api/embed through langchain-ollama (e.g. nomic-embed-text).
- HashingEmbedder: deterministic feature-hashing bag of words; a fast stand-in for benchmarks/tests.
- QueryBatcher: concurrent query embeddings share one model call (a burst of questions).
- CachedEmbedder: LRU cache keyed by (model, kind, sha256(text)) in front of any of them.

Vectors are always L2-normalised so that a dot product is the cosine similarity.

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hashlib
import logging
import math
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from ragchat.services.batching import Batcher
from ragchat.services.config import RAGSettings
from ragchat.services.errors import EmbeddingError
from ragchat.services.retry import RetryPolicy, retry_async

logger = logging.getLogger(__name__)

T = TypeVar("T")

LOCAL_MODEL_NAME = "all-MiniLM-L6-v2"
LOCAL_DIMENSION = 384
LOCAL_MAX_SEQ_LENGTH = 256  # the model's input window in word pieces

# nomic-embed-text was trained with task prefixes; OllamaEmbeddings does not add them.
NOMIC_QUERY_PREFIX = "search_query: "
NOMIC_DOCUMENT_PREFIX = "search_document: "


@runtime_checkable
class Embedder(Protocol):
    # Read-only here: wrappers such as CachedEmbedder expose them as properties of the inner embedder.
    @property
    def model_name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...

    async def embed_query(self, text: str) -> list[float]: ...


def _normalise(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0.0:
        return [0.0 for _ in vector]
    return [float(x) / norm for x in vector]


# --------------------------------------------------------------------------- local model


class LocalEmbedder:
    """all-MiniLM-L6-v2 in-process (384 dims, 256 word-piece window); work runs in a worker thread.

    `runtime` picks how the same model runs: "onnx-int8" (default: ONNX Runtime, weights quantized to
    8 bit, the fastest on a CPU) or "onnx" (ONNX Runtime, float32: the torch model's vectors). Both
    give vectors of the same model, so they share one collection (ragchat/services/onnx_model.py;
    the figures in docs/benchmarks.md)."""

    model_name = LOCAL_MODEL_NAME
    dimension = LOCAL_DIMENSION
    max_tokens = LOCAL_MAX_SEQ_LENGTH

    def __init__(self, *, batch_size: int = 32, runtime: str = "onnx-int8", onnx_dir: str = "") -> None:
        from ragchat.services.onnx_model import RUNTIMES

        if runtime not in RUNTIMES:
            raise ValueError(f"EMBEDDING_RUNTIME={runtime!r}: expected one of {', '.join(RUNTIMES)}")
        self.batch_size = batch_size
        self.runtime = runtime
        self.onnx_dir = onnx_dir
        self._onnx: Any = None
        self._process: Any = None

    @property
    def model(self) -> Any:
        """The loaded OnnxModel (looked up once: chunking counts the tokens of every sentence through it)."""
        if self._onnx is None:
            from ragchat.services import onnx_model

            self._onnx = onnx_model.load(
                self.onnx_dir or None, self.runtime, max_tokens=LOCAL_MAX_SEQ_LENGTH, batch_size=self.batch_size
            )
        return self._onnx

    @property
    def process(self) -> Any:
        """The child process that embeds (onnx_model.ModelProcess: its own GIL)."""
        if self._process is None:
            from ragchat.services import onnx_model

            self._process = onnx_model.model_process(
                self.onnx_dir or None, self.runtime, max_tokens=LOCAL_MAX_SEQ_LENGTH, batch_size=self.batch_size
            )
        return self._process

    def _encode(self, texts: list[str]) -> list[list[float]]:
        try:
            return self.process.encode(texts)
        except Exception as e:  # runtime/tokenizer failures surface as one error class
            raise EmbeddingError(f"local embedding failed: {e}") from e

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return await asyncio.to_thread(self._encode, list(texts))

    async def embed_query(self, text: str) -> list[float]:
        return (await asyncio.to_thread(self._encode, [text]))[0]

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._encode, list(texts))

    def count_tokens(self, text: str) -> int:
        """Word pieces the model sees for `text` (without [CLS]/[SEP]); used to size chunks."""
        return self.model.count_tokens(text)


# --------------------------------------------------------------------------- hashing

_WORD_RE = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """Feature-hashing bag of words (+ word bigrams), signed, L2-normalised; deterministic across runs.

    Not semantic: similar texts share words, not meaning. Good enough to exercise ingestion and
    search paths at speed, and honest about what it is through its model name.
    """

    def __init__(self, *, dimension: int = 384) -> None:
        self.dimension = dimension
        self.model_name = f"hashing-{dimension}"

    def _bucket(self, feature: str) -> tuple[int, float]:
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self.dimension, (1.0 if (value >> 63) & 1 else -1.0)

    def embed_sync(self, text: str) -> list[float]:
        vector = [0.0] * self.dimension
        words = _WORD_RE.findall(text.lower())
        features = words + [f"{a} {b}" for a, b in zip(words, words[1:])]
        for feature in features:
            index, sign = self._bucket(feature)
            vector[index] += sign
        return _normalise(vector)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed_sync(t) for t in texts]

    async def embed_query(self, text: str) -> list[float]:
        return self.embed_sync(text)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed_sync(t) for t in texts]

    def count_tokens(self, text: str) -> int:
        return len(_WORD_RE.findall(text))


# --------------------------------------------------------------------------- ollama


def keep_alive_seconds(value: str | int) -> int:
    """Ollama's keep_alive ("5m", "1h", "30s", "-1") as the seconds OllamaEmbeddings accepts."""
    if isinstance(value, int):
        return value
    text = value.strip().lower()
    units = {"s": 1, "m": 60, "h": 3600}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(float(text))


class OllamaEmbedder:
    """Ollama embeddings via langchain-ollama; adds nomic-embed-text's task prefixes itself."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        batch_size: int = 32,
        timeout: float = 30.0,
        keep_alive: str | int | None = None,
        retry_attempts: int = 3,
        retry_initial_delay: float = 1.0,
        retry_max_delay: float = 10.0,
        dimension: int = 0,
    ) -> None:
        self.model_name = model
        self.dimension = dimension  # 0 until discovered from the first embedding
        self.batch_size = batch_size
        self._retry = RetryPolicy(retries=retry_attempts, initial_delay=retry_initial_delay, max_delay=retry_max_delay)
        kwargs: dict[str, Any] = dict(model=model, base_url=base_url, client_kwargs={"timeout": timeout})
        if keep_alive is not None:
            kwargs["keep_alive"] = keep_alive_seconds(keep_alive)
        self._kwargs = kwargs
        # Its async httpx client pools connections that belong to the event loop that opened them: a
        # command that runs each file on a loop of its own (async_to_sync) found the second file's
        # embedding failing with "Event loop is closed". So one client per loop, as OllamaLLM does.
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self._uses_prefixes = model.split(":")[0].endswith("nomic-embed-text")

    def _prefixed(self, text: str, prefix: str) -> str:
        return prefix + text if self._uses_prefixes else text

    @property
    def _client(self) -> Any:
        """This event loop's OllamaEmbeddings."""
        from langchain_ollama import OllamaEmbeddings

        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = OllamaEmbeddings(**self._kwargs)
        return client

    async def _with_retry(self, call: Callable[[], Awaitable[T]]) -> T:
        try:
            return await retry_async(call, policy=self._retry, what=f"ollama embed {self.model_name}")
        except EmbeddingError:
            raise
        except Exception as e:
            raise EmbeddingError(f"Ollama embedding with {self.model_name!r} failed: {e}") from e

    def _check(self, vectors: list[list[float]], expected: int) -> list[list[float]]:
        if len(vectors) != expected:
            raise EmbeddingError(f"Ollama returned {len(vectors)} vectors for {expected} texts")
        if vectors and not self.dimension:
            self.dimension = len(vectors[0])
        for vector in vectors:
            if len(vector) != self.dimension:
                raise EmbeddingError(
                    f"Ollama returned a {len(vector)}-dim vector; {self.model_name} gave {self.dimension}"
                )
        return [_normalise(v) for v in vectors]

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = [self._prefixed(t, NOMIC_DOCUMENT_PREFIX) for t in texts[start : start + self.batch_size]]
            vectors = await self._with_retry(functools.partial(self._client.aembed_documents, batch))
            out.extend(self._check(vectors, len(batch)))
        return out

    async def embed_query(self, text: str) -> list[float]:
        prefixed = self._prefixed(text, NOMIC_QUERY_PREFIX)
        vector = await self._with_retry(lambda: self._client.aembed_query(prefixed))
        return self._check([vector], 1)[0]

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Several queries in one /api/embed call (with the query prefix, not the document one)."""
        batch = [self._prefixed(t, NOMIC_QUERY_PREFIX) for t in texts]
        vectors = await self._with_retry(functools.partial(self._client.aembed_documents, batch))
        return self._check(vectors, len(batch))

    def count_tokens(self, text: str) -> int:
        """Chunk sizing (ingestion calls it). Ollama exposes no tokenizer: over-estimate at about three
        characters per token, so chunks stay inside the model's input window."""
        return -(-len(text) // 3)

    async def discover_dimension(self) -> int:
        """Embed a probe once so `dimension` is known before a collection is created."""
        if not self.dimension:
            await self.embed_query("dimension probe")
        return self.dimension


# --------------------------------------------------------------------------- batching


class _Wrapper:
    """An embedder in front of another: its name and dimension, and whatever else it does not
    define itself (count_tokens, discover_dimension, ...), are the wrapped embedder's."""

    inner: Embedder

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class QueryBatcher(_Wrapper):
    """Concurrent `embed_query` calls share one model call (ragchat.services.batching).

    Embedding 200 queries one by one costs about 15 ms each on the local model, and they queue for
    the same CPU; as one batch they cost about 3.6 ms each. A query that finds the model idle is
    embedded at once; queries that arrive while a batch runs go together into the next one (at most
    `max_batch`); the same question twice in one batch is embedded once.
    """

    def __init__(self, inner: Embedder, *, max_batch: int = 64) -> None:
        self.inner = inner
        self.max_batch = max(1, max_batch)
        self._batcher: Batcher[str, list[float]] = Batcher(self._embed_batch, max_batch=self.max_batch)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.inner.embed_documents(texts)

    async def embed_query(self, text: str) -> list[float]:
        if getattr(self.inner, "embed_queries", None) is None or self.max_batch == 1:
            return await self.inner.embed_query(text)
        return list(await self._batcher.submit(text))

    async def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        unique = list(dict.fromkeys(texts))
        vectors = dict(zip(unique, await self.inner.embed_queries(unique), strict=True))  # type: ignore[attr-defined]
        return [vectors[text] for text in texts]


# --------------------------------------------------------------------------- cache


class CachedEmbedder(_Wrapper):
    """LRU cache in front of an embedder, keyed by (model, kind, sha256(text)).

    The kind ("query"/"document") is part of the key because some models embed the same text
    differently for each (nomic's prefixes).
    """

    def __init__(self, inner: Embedder, max_size: int = 10_000) -> None:
        self.inner = inner
        self.max_size = max_size
        self._cache: OrderedDict[tuple[str, str, str], list[float]] = OrderedDict()
        self._lock = threading.Lock()
        # Query embeddings under way, per event loop (a task belongs to its loop).
        self._pending: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[tuple[str, str, str], asyncio.Task[list[float]]]
        ] = weakref.WeakKeyDictionary()
        self.hits = 0
        self.misses = 0

    def _key(self, kind: str, text: str) -> tuple[str, str, str]:
        return (self.inner.model_name, kind, hashlib.sha256(text.encode("utf-8")).hexdigest())

    def _get(self, key: tuple[str, str, str]) -> list[float] | None:
        with self._lock:
            vector = self._cache.get(key)
            if vector is not None:
                self._cache.move_to_end(key)
                self.hits += 1
            else:
                self.misses += 1
            return vector

    def _put(self, key: tuple[str, str, str], vector: list[float]) -> None:
        if self.max_size <= 0:
            return
        with self._lock:
            self._cache[key] = vector
            self._cache.move_to_end(key)
            while len(self._cache) > self.max_size:
                self._cache.popitem(last=False)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        keys = [self._key("document", t) for t in texts]
        found = [self._get(k) for k in keys]
        # Embed each missing distinct text once, even if it repeats within this call.
        missing: dict[tuple[str, str, str], str] = {}
        for key, text, vector in zip(keys, texts, found):
            if vector is None:
                missing.setdefault(key, text)
        if missing:
            vectors = await self.inner.embed_documents(list(missing.values()))
            fresh = dict(zip(missing.keys(), vectors))
            for key, vector in fresh.items():
                self._put(key, vector)
            found = [v if v is not None else fresh[k] for k, v in zip(keys, found)]
        return [list(v) for v in found]  # type: ignore[arg-type]

    def cached_query(self, text: str) -> list[float] | None:
        """The query's vector when the cache holds it, without a model call or an await (sync callers
        on a worker thread: a trip to the event loop waits behind everything the loop does)."""
        vector = self._get(self._key("query", text))
        return list(vector) if vector is not None else None

    async def embed_query(self, text: str) -> list[float]:
        """The query's vector: from the cache, or from the one model call already under way for
        the same text (RAGService.embed_ahead, or the same question twice at once), or a new one."""
        key = self._key("query", text)
        vector = self._get(key)
        if vector is None:
            loop = asyncio.get_running_loop()
            pending = self._pending.setdefault(loop, {})
            task = pending.get(key)
            if task is None:
                # A context of its own, as the Batcher's worker: it serves every caller of the text.
                task = pending[key] = loop.create_task(
                    self._embed_query(key, text, pending), context=contextvars.Context()
                )
            # Shielded: a caller that gives up (a closed tab) does not cancel it for the others.
            vector = await asyncio.shield(task)
        return list(vector)

    async def _embed_query(self, key: tuple[str, str, str], text: str, pending: dict) -> list[float]:
        try:
            vector = await self.inner.embed_query(text)
            self._put(key, vector)
            return vector
        finally:
            pending.pop(key, None)

    @property
    def size(self) -> int:
        # Not __len__: an empty cache must not make the embedder falsy.
        return len(self._cache)


def build_embedder(settings: RAGSettings) -> Embedder:
    """The configured embedder ("local" default, "ollama", "hashing"), its concurrent queries
    batched, wrapped in the cache."""
    backend = settings.embedding_backend.strip().lower()
    inner: Embedder
    if backend == "local":
        inner = LocalEmbedder(
            batch_size=settings.embedding_batch_size,
            runtime=settings.embedding_runtime.strip().lower(),
            onnx_dir=settings.embedding_onnx_dir,
        )
    elif backend == "ollama":
        inner = OllamaEmbedder(
            model=settings.embedding_model,
            base_url=settings.ollama_base_url,
            batch_size=settings.embedding_batch_size,
            timeout=settings.rag_timeout_seconds,
            keep_alive=settings.ollama_keep_alive,
            retry_attempts=settings.rag_retry_attempts,
            retry_initial_delay=settings.rag_retry_initial_delay,
            retry_max_delay=settings.rag_retry_max_delay,
        )
    elif backend == "hashing":
        inner = HashingEmbedder(dimension=384)
    else:
        raise ValueError(f"EMBEDDING_BACKEND={settings.embedding_backend!r}: expected 'local', 'ollama' or 'hashing'")
    return CachedEmbedder(
        QueryBatcher(inner, max_batch=settings.embedding_query_batch), max_size=settings.embedding_cache_size
    )
