"""Token counting (R-CORE-5): model-accurate where Ollama gave us counts, cached, len/4 otherwise.

Spec v3 counts every text with one `/api/generate` call; on the query path that is several LLM round
trips per question (system prompt, each history message, each chunk). Here `count()` is synchronous
and never touches the network:

1. an exact count, if one is cached for (model, sha256(text)) — filled by `prefetch_exact()` off the
   query path (e.g. at ingestion), with spec v3's `/api/generate` + `num_predict: 0` method;
2. otherwise an estimate: len/4 until calibrated, then len / (chars per token) where the ratio is
   learned from the usage counts the model server returns with a generation (Ollama's
   `prompt_eval_count`, the OpenAI API's `usage.prompt_tokens`, against the prompt's characters; fed
   by the LLM client, llm.py). The OpenAI-compatible API has no tokenize call: there, counts are
   always these calibrated estimates.

References: requirement IDs (R-…): docs/requirements.md; "spec v3": docs/specs/rag-service-spec-v3-FINAL.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Iterable

import httpx

log = logging.getLogger("ragchat.tokens")

DEFAULT_CHARS_PER_TOKEN = 4.0
# Observations outside this band are ignored: Ollama can report fewer prompt tokens when it reuses
# its KV cache, and a tiny prompt is dominated by the chat template.
_MIN_RATIO, _MAX_RATIO = 1.5, 8.0
_MIN_OBSERVED_CHARS = 200


def text_key(model: str, text: str) -> tuple[str, str]:
    return (model, hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest())


class ExactCountCache:
    """Bounded LRU of exact counts keyed by (model, sha256 of text); thread-safe."""

    def __init__(self, max_entries: int = 100_000) -> None:
        self.max_entries = max_entries
        self._data: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> int | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: tuple[str, str], value: int) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)


class Calibration:
    """Chars-per-token ratio per model, learned from (prompt chars, prompt tokens) pairs."""

    def __init__(self) -> None:
        self._totals: dict[str, list[int]] = {}  # model -> [chars, tokens]
        self._lock = threading.Lock()

    def observe(self, model: str, chars: int, tokens: int | None) -> bool:
        """Record one observation; returns False when it was ignored as implausible."""
        if not tokens or tokens <= 0 or chars < _MIN_OBSERVED_CHARS:
            return False
        ratio = chars / tokens
        if not _MIN_RATIO <= ratio <= _MAX_RATIO:
            return False
        with self._lock:
            totals = self._totals.setdefault(model, [0, 0])
            totals[0] += chars
            totals[1] += tokens
        return True

    def ratio(self, model: str | None) -> float | None:
        """The model's learned ratio; for model None, the pooled ratio over all models."""
        with self._lock:
            if model is not None:
                totals = self._totals.get(model)
                return totals[0] / totals[1] if totals else None
            chars = sum(t[0] for t in self._totals.values())
            tokens = sum(t[1] for t in self._totals.values())
            return chars / tokens if tokens else None

    def clear(self) -> None:
        with self._lock:
            self._totals.clear()


# Shared per process: the LLM client feeds it, every counter reads it.
default_calibration = Calibration()
default_exact_cache = ExactCountCache()


class TokenCounter:
    """`count(text)` for one model (or, with model None, for whatever models were observed)."""

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        calibration: Calibration | None = None,
        exact_cache: ExactCountCache | None = None,
        timeout: float = 5.0,
        concurrency: int = 4,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/") if base_url else None
        self.calibration = calibration if calibration is not None else default_calibration
        self.exact_cache = exact_cache if exact_cache is not None else default_exact_cache
        self.timeout = timeout
        self.concurrency = concurrency

    # ---- query path: synchronous, no I/O ---------------------------------------------------
    def count(self, text: str, *, model: str | None = None) -> int:
        model = model or self.model
        if not text:
            return 0
        if model is not None:
            exact = self.exact_cache.get(text_key(model, text))
            if exact is not None:
                return exact
        return self.estimate(text, model=model)

    def estimate(self, text: str, *, model: str | None = None) -> int:
        ratio = self.chars_per_token(model=model)
        return max(1, math.ceil(len(text) / ratio)) if text else 0

    def chars_per_token(self, *, model: str | None = None) -> float:
        model = model or self.model
        return self.calibration.ratio(model) or self.calibration.ratio(None) or DEFAULT_CHARS_PER_TOKEN

    @property
    def is_calibrated(self) -> bool:
        return self.calibration.ratio(self.model) is not None

    def observe(self, *, prompt_chars: int, prompt_tokens: int | None, model: str | None = None) -> bool:
        """Learn from a real generation's usage counts."""
        model = model or self.model
        if model is None:
            return False
        return self.calibration.observe(model, prompt_chars, prompt_tokens)

    # ---- off the query path: exact counts from Ollama ---------------------------------------
    async def prefetch_exact(self, texts: Iterable[str], *, model: str | None = None) -> int:
        """Ask Ollama for exact counts of texts not cached yet (spec v3's `/api/generate`,
        `num_predict: 0`); returns how many were fetched. Failures keep the estimate (logged)."""
        model = model or self.model
        if model is None or self.base_url is None:
            raise ValueError("prefetch_exact needs a model and a base_url")
        todo = list(dict.fromkeys(t for t in texts if t and self.exact_cache.get(text_key(model, t)) is None))
        if not todo:
            return 0
        semaphore = asyncio.Semaphore(self.concurrency)
        async with httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout) as client:

            async def one(text: str) -> bool:
                async with semaphore:
                    tokens = await self._exact(client, model, text)
                if tokens is None:
                    return False
                self.exact_cache.put(text_key(model, text), tokens)
                self.calibration.observe(model, len(text), tokens)
                return True

            results = await asyncio.gather(*(one(t) for t in todo))
        return sum(results)

    async def _exact(self, client: httpx.AsyncClient, model: str, text: str) -> int | None:
        try:
            response = await client.post(
                "/api/generate",
                json={
                    "model": model,
                    "prompt": text,
                    "raw": True,  # count the text itself, not the chat template around it
                    "stream": False,
                    "options": {"num_predict": 0},
                },
            )
            response.raise_for_status()
            count = response.json().get("prompt_eval_count")
        except (httpx.HTTPError, ValueError) as e:
            log.warning("exact token count failed; keeping the estimate", extra={"error": repr(e)})
            return None
        return count if isinstance(count, int) and count > 0 else None
