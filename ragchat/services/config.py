"""RAG core configuration: every variable of spec v3 (same names, same defaults), plus the ones the
product adds (vector store, embeddings, chunking, retries). Built from the environment, frozen.

References: requirement IDs (R-…): docs/requirements.md; "spec v3": docs/specs/rag-service-spec-v3-FINAL.md.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

# The chat models a company may use, each with its context window and the most tokens an answer may
# take: RAG_MODELS, written "NAME=CONTEXT_WINDOW/MAX_RESPONSE" and separated by commas.
DEFAULT_RAG_MODELS = "llama3.2=8192/1024,qwen3:8b=32768/2048,deepseek-r1:32b=65536/4096"
RAG_MODELS_FORMAT = "NAME=CONTEXT_WINDOW/MAX_RESPONSE, separated by commas (e.g. llama3.2=8192/1024)"
_LIMITS_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")

# Where answers are generated: an Ollama server, or a server speaking the OpenAI-compatible chat API
# (vLLM, llama.cpp's server, LM Studio, TGI, LocalAI).
LLM_PROVIDERS = ("ollama", "openai")

# Models that reason before answering; their `think` flag is set to False so that the
# reasoning does not land in the answer.
REASONING_MODELS = ("qwen3", "deepseek-r1")

# Embedding models and their input window in tokens (word pieces), used to size chunks.
EMBEDDING_WINDOWS: dict[str, int] = {
    "all-MiniLM-L6-v2": 256,
    "nomic-embed-text": 2048,
    "hashing-384": 100_000,
}


class SettingsError(ValueError):
    """A setting that cannot work; the message names the variable and the bad value."""


@dataclass(frozen=True)
class ModelLimits:
    context_window: int  # tokens the model reads and writes in one call (Ollama's num_ctx)
    max_response: int  # most tokens one answer may take (Ollama's num_predict, OpenAI's max_tokens)

    def as_dict(self) -> dict[str, int]:
        return {"context_window": self.context_window, "max_response": self.max_response}


def canonical_model_name(name: str) -> str:
    """Ollama's naming rule: no tag means the `latest` tag. Harmless for other servers' model ids:
    both sides of every comparison go through it."""
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


def parse_models(text: str) -> dict[str, ModelLimits]:
    """RAG_MODELS as a mapping; SettingsError naming the first bad entry."""
    models: dict[str, ModelLimits] = {}
    seen: dict[str, str] = {}
    for entry in text.split(","):
        if not entry.strip():
            continue
        name, sep, limits = entry.rpartition("=")
        name = name.strip()
        match = _LIMITS_RE.match(limits) if sep else None
        if not name or match is None:
            raise SettingsError(f"RAG_MODELS entry {entry.strip()!r} is not {RAG_MODELS_FORMAT}.")
        context_window, max_response = int(match.group(1)), int(match.group(2))
        if context_window <= 0 or max_response <= 0 or max_response >= context_window:
            raise SettingsError(
                f"RAG_MODELS entry {entry.strip()!r}: the response limit must be above 0 and below the context window."
            )
        canonical = canonical_model_name(name)
        if canonical in seen:
            raise SettingsError(f"RAG_MODELS names the model {name!r} twice (as {seen[canonical]!r} too).")
        seen[canonical] = name
        models[name] = ModelLimits(context_window, max_response)
    if not models:
        raise SettingsError(f"RAG_MODELS lists no model: expected {RAG_MODELS_FORMAT}.")
    return models


def _bool(value: str) -> bool:
    return value.strip().lower() in {"1", "true", "yes", "on"}


# Values where a stray space (easy to leave in .env) would only cause confusion.
_TRIMMED = frozenset({"chat_model", "rag_models", "llm_provider", "llm_base_url"})


@dataclass(frozen=True)
class RAGSettings:
    # spec v3 "Configuration"
    ollama_base_url: str = "http://localhost:11434"
    chat_model: str = "llama3.2"
    # The chat models allowed, with their limits (DEFAULT_RAG_MODELS; CHAT_MODEL must be one).
    rag_models: str = DEFAULT_RAG_MODELS
    # Where answers are generated (LLM_PROVIDERS). "openai": LLM_BASE_URL is the API's root, the
    # part before /chat/completions (e.g. http://localhost:8080/v1); LLM_API_KEY its bearer token,
    # if it wants one. "ollama": OLLAMA_BASE_URL, unless LLM_BASE_URL is set.
    llm_provider: str = "ollama"
    llm_base_url: str = ""
    llm_api_key: str = ""
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

    def __post_init__(self) -> None:
        if self.allowlisted_model(self.chat_model) is None:
            raise SettingsError(
                f"CHAT_MODEL {self.chat_model!r} is not in RAG_MODELS ({', '.join(self.models)}): add it, "
                f"e.g. RAG_MODELS={self.rag_models},{self.chat_model}=8192/1024"
            )
        if self.llm_provider not in LLM_PROVIDERS:
            raise SettingsError(f"LLM_PROVIDER {self.llm_provider!r}: expected one of {', '.join(LLM_PROVIDERS)}.")
        if self.llm_provider == "openai" and not self.llm_base_url:
            raise SettingsError(
                "LLM_PROVIDER=openai needs LLM_BASE_URL, the API's root (e.g. http://localhost:8080/v1)."
            )

    @functools.cached_property
    def models(self) -> dict[str, ModelLimits]:
        """RAG_MODELS parsed: each allowed model's limits (SettingsError if it cannot be)."""
        return parse_models(self.rag_models)

    @property
    def llm_url(self) -> str:
        """The generation server's base URL for the configured provider."""
        if self.llm_provider == "ollama":
            return (self.llm_base_url or self.ollama_base_url).rstrip("/")
        return self.llm_base_url.rstrip("/")

    def allowlisted_model(self, model: str) -> str | None:
        """The RAG_MODELS name naming the same model as `model` ("llama3.2:latest" → "llama3.2")."""
        if model in self.models:
            return model
        wanted = canonical_model_name(model)
        return next((name for name in self.models if canonical_model_name(name) == wanted), None)

    def model_limits(self, model: str) -> ModelLimits | None:
        """The limits of an allowed model (any spelling `allowlisted_model` accepts), else None."""
        name = self.allowlisted_model(model)
        return None if name is None else self.models[name]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RAGSettings:
        """Read every field from the upper-cased variable of the same name; unset keeps the default."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(f.name.upper())
            if raw is None or raw == "":
                continue
            kind = str(f.type)  # the annotation's text (`from __future__ import annotations`)
            try:
                if kind == "bool":
                    values[f.name] = _bool(raw)
                elif kind == "int":
                    values[f.name] = int(raw)
                elif kind == "float":
                    values[f.name] = float(raw)
                else:
                    values[f.name] = raw.strip() if f.name in _TRIMMED else raw
            except ValueError:
                what = "a whole number" if kind == "int" else "a number"
                raise SettingsError(f"{f.name.upper()}={raw!r} is not {what}.") from None
        return cls(**values)

    @property
    def effective_chunk_size(self) -> int:
        """Chunk size in tokens: the setting, or what fits the embedder's window with room to spare."""
        if self.chunk_size_tokens:
            return self.chunk_size_tokens
        window = EMBEDDING_WINDOWS.get(self.embedding_model.split(":")[0], 512)
        return max(64, min(int(window * 0.8), 512))
