"""RAG core configuration: every variable of spec v3 (same names, same defaults), plus the ones the
product adds (vector store, embeddings, chunking, retries). Built from the environment, frozen.

References: requirement IDs (R-…): docs/requirements.md; "spec v3": docs/specs/rag-service-spec-v3-FINAL.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

MODEL_LIMITS: dict[str, dict[str, int]] = {
    "llama3.2": {"context_window": 8192, "max_response": 1024},
    "qwen3:8b": {"context_window": 32768, "max_response": 2048},
    "deepseek-r1:32b": {"context_window": 65536, "max_response": 4096},
}

# Models that reason before answering; their `think` flag is set to False so that the
# reasoning does not land in the answer.
REASONING_MODELS = ("qwen3", "deepseek-r1")

# Embedding models and their input window in tokens (word pieces), used to size chunks.
EMBEDDING_WINDOWS: dict[str, int] = {
    "all-MiniLM-L6-v2": 256,
    "nomic-embed-text": 2048,
    "hashing-384": 100_000,
}


def _bool(value: str) -> bool:
    return value.strip().lower() in {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class RAGSettings:
    # spec v3 "Configuration"
    ollama_base_url: str = "http://localhost:11434"
    chat_model: str = "llama3.2"
    rag_temperature: float = 0.1
    rag_timeout_seconds: float = 30
    rag_confidence_threshold: int = 60
    rag_admin_email: str = "admin@company.com"
    # spec v3 "Token Budget Configuration"
    rag_max_context_tokens: int = 3000
    rag_max_history_tokens: int = 1000
    rag_max_response_tokens: int = 1024
    rag_system_prompt_tokens: int = 500
    # spec v3 "Retrieval Quality Configuration"
    rag_min_similarity_score: float = 0.3
    rag_max_chunks_per_doc: int = 3
    rag_total_context_chunks: int = 5
    rag_dedup_candidates_cap: int = 15
    rag_chunk_overlap_threshold: float = 0.9
    # Vector store: embedded on-disk engine under qdrant_path unless qdrant_url is set.
    qdrant_url: str = ""
    qdrant_api_key: str = ""
    qdrant_path: str = "data/qdrant"
    qdrant_collection: str = "ragchat_chunks"
    rag_hybrid_search: bool = True  # dense + BM25 fused with RRF
    rag_prefetch_limit: int = 50  # candidates per stage before fusion
    # Verified knowledge that needs review (a source changed, its review date passed): still
    # retrieved and cited, shown as "needs review" (true), or left out of retrieval (false).
    rag_needs_review_cited: bool = True
    # Embeddings: "local" (all-MiniLM-L6-v2 on ONNX Runtime, offline), "ollama", or "hashing" (fast stand-in).
    embedding_backend: str = "local"
    embedding_model: str = "all-MiniLM-L6-v2"
    # How the local model runs: "onnx-int8" (ONNX Runtime, 8-bit weights) or "onnx" (float32); the
    # files are exported once, at install time, into embedding_onnx_dir (ragchat/services/onnx_export.py).
    embedding_runtime: str = "onnx-int8"
    embedding_onnx_dir: str = ""
    embedding_batch_size: int = 32
    embedding_cache_size: int = 10_000
    # Concurrent question embeddings share one model call of at most this many (1 = one by one).
    embedding_query_batch: int = 64
    # Optional cross-encoder rerank stage (R-RET-7); empty = off.
    rag_reranker: str = ""
    # Chunking (0 = sized to the embedder's input window)
    chunk_size_tokens: int = 0
    chunk_overlap_tokens: int = 32
    # Retries for transient Ollama/Qdrant errors: 1 s initial, x2, 3 retries, 10 s max
    # (docs/specs/rag-llm-service-architecture.md §Retry Logic)
    rag_retry_attempts: int = 3
    rag_retry_initial_delay: float = 1.0
    rag_retry_max_delay: float = 10.0
    # Ollama client
    ollama_keep_alive: str = "5m"
    # Question validation (QuestionTooShort / QuestionTooLong of
    # docs/specs/rag-llm-service-architecture.md §Exception Hierarchy)
    question_min_chars: int = 3
    question_max_chars: int = 2000

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RAGSettings:
        """Read every field from the upper-cased variable of the same name; unset keeps the default."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(f.name.upper())
            if raw is None or raw == "":
                continue
            default = f.default
            if isinstance(default, bool):
                values[f.name] = _bool(raw)
            elif isinstance(default, int):
                values[f.name] = int(raw)
            elif isinstance(default, float):
                values[f.name] = float(raw)
            else:
                values[f.name] = raw
        return cls(**values)

    @property
    def effective_chunk_size(self) -> int:
        """Chunk size in tokens: the setting, or what fits the embedder's window with room to spare."""
        if self.chunk_size_tokens:
            return self.chunk_size_tokens
        window = EMBEDDING_WINDOWS.get(self.embedding_model.split(":")[0], 512)
        return max(64, min(int(window * 0.8), 512))
