"""The optional cross-encoder rerank stage (R-RET-7, docs/specs/rag-providers-spec.md "Cross-Encoder").

RAG_RERANKER names a sentence-transformers cross-encoder: a local directory, or a model id already
in the local Hugging Face cache (nothing is downloaded: the app must work offline). Without the
setting there is no rerank stage. A model that cannot be loaded or fails to score never breaks an
answer: retrieval.apply_reranker passes the results through unchanged and logs a warning.

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from .config import RAGSettings
from .types import SearchResult

logger = logging.getLogger(__name__)


class CrossEncoderReranker:
    """Scores (query, chunk) pairs with a cross-encoder and orders the chunks best first; ties keep
    their incoming order. The chunks' cosine `score` is left as it is."""

    def __init__(self, model: str, *, batch_size: int = 32) -> None:
        self.model_name = model
        self.batch_size = batch_size
        self._model: Any = None
        self._error: Exception | None = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None and self._error is None:
                try:
                    from sentence_transformers import CrossEncoder

                    self._model = CrossEncoder(self.model_name, local_files_only=True, device="cpu")
                    logger.info("cross-encoder loaded", extra={"event": "rerank_loaded", "model": self.model_name})
                except Exception as e:  # remembered: one failed load, not one per question
                    self._error = e
            if self._error is not None:
                raise RuntimeError(f"cross-encoder {self.model_name!r} cannot be loaded: {self._error}")
            return self._model

    def _scores(self, query: str, texts: list[str]) -> list[float]:
        model = self._load()
        return [float(s) for s in model.predict([(query, t) for t in texts], batch_size=self.batch_size)]

    async def rerank(self, query: str, results: list[SearchResult]) -> list[SearchResult]:
        scores = await asyncio.to_thread(self._scores, query, [r.chunk_text for r in results])
        order = sorted(range(len(results)), key=lambda i: (-scores[i], i))
        return [results[i] for i in order]

    def status(self) -> dict[str, Any]:
        """For /health (docs/specs/rag-providers-spec.md "Cross-Encoder Health Reporting")."""
        if self._error is not None:
            return {"model": self.model_name, "status": "failed", "error": str(self._error)}
        return {"model": self.model_name, "status": "loaded" if self._model is not None else "not loaded yet"}


def build_reranker(settings: RAGSettings) -> CrossEncoderReranker | None:
    if not settings.rag_reranker:
        logger.info(
            "cross-encoder rerank disabled (set RAG_RERANKER to a local cross-encoder to enable it)",
            extra={"event": "rerank_disabled"},
        )
        return None
    return CrossEncoderReranker(settings.rag_reranker)
