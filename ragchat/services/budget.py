"""Token budget for the RAG prompt (spec v3 "Token Budget Allocation").

Priority, highest first: the system prompt (never truncated), the most recent chat history
(oldest dropped first), the highest-scored context chunks (lowest-scored dropped first).
`count_fn` is TokenCounter.count: model-accurate where Ollama reported counts, len/4 otherwise.

References: "spec v3": docs/specs/rag-service-spec-v3-FINAL.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .config import RAGSettings
from .errors import TokenBudgetExceededError
from .types import ChatMessage, SearchResult

CountFn = Callable[[str], int]


def format_history_message(message: ChatMessage) -> str:
    return f"{message.role}: {message.content}"


class TokenBudget:
    """Manages token allocation for RAG prompt."""

    def __init__(self, model: str, settings: RAGSettings):
        self.model = model
        self.max_context = settings.rag_max_context_tokens
        self.max_history = settings.rag_max_history_tokens
        self.max_response = settings.rag_max_response_tokens
        self.system_reserve = settings.rag_system_prompt_tokens
        limits = settings.model_limits(model)  # `llama3.2:latest` is the same model as `llama3.2`
        if limits is None:
            raise KeyError(f"Model '{model}' has no entry in RAG_MODELS")
        self.context_window = limits.context_window
        # Filled by allocate(): what the kept history and chunks cost.
        self.history_tokens = 0
        self.context_tokens = 0

    def allocate(
        self,
        system_prompt: str,
        chat_history: Sequence[ChatMessage] | None,
        context_chunks: Sequence[SearchResult],
        count_fn: CountFn,
    ) -> tuple[str, str, list[SearchResult]]:
        """Allocate tokens and truncate as needed; returns (system_prompt, history_str, chunks).

        Raises TokenBudgetExceededError if system + response reserve exceeds the context window.
        """
        system_tokens = count_fn(system_prompt)
        available = self.context_window - system_tokens - self.max_response
        if available < 0:
            raise TokenBudgetExceededError(
                f"System prompt ({system_tokens}) + response reserve ({self.max_response}) "
                f"exceeds context window ({self.context_window})"
            )

        history_budget = min(self.max_history, available // 3)
        history_str, history_tokens = self._truncate_history(list(chat_history or []), history_budget, count_fn)
        available -= history_tokens

        context_budget = min(self.max_context, available)
        final_chunks, context_tokens = self._fit_context(list(context_chunks), context_budget, count_fn)
        self.history_tokens = history_tokens
        self.context_tokens = context_tokens
        return system_prompt, history_str, final_chunks

    def _truncate_history(self, history: list[ChatMessage], max_tokens: int, count_fn: CountFn) -> tuple[str, int]:
        """Keep the most recent messages that fit; stop at the first (newest-first) that does not,
        so the kept history is one contiguous recent stretch."""
        if not history:
            return "", 0
        included: list[ChatMessage] = []
        total_tokens = 0
        for msg in reversed(history):
            msg_tokens = count_fn(format_history_message(msg))
            if total_tokens + msg_tokens <= max_tokens:
                included.insert(0, msg)
                total_tokens += msg_tokens
            else:
                break
        return "\n".join(format_history_message(m) for m in included), total_tokens

    def _fit_context(
        self, chunks: list[SearchResult], max_tokens: int, count_fn: CountFn
    ) -> tuple[list[SearchResult], int]:
        """Fit chunks in the budget, best score first, so the lowest-scored are the ones dropped."""
        # sorted() is stable: equal scores keep retrieval order, which keeps prompts deterministic.
        sorted_chunks = sorted(chunks, key=lambda c: c.score, reverse=True)
        included: list[SearchResult] = []
        total_tokens = 0
        for chunk in sorted_chunks:
            chunk_tokens = count_fn(chunk.chunk_text)
            if total_tokens + chunk_tokens <= max_tokens:
                included.append(chunk)
                total_tokens += chunk_tokens
        return included, total_tokens
