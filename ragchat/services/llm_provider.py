"""The model server client of LLM_PROVIDER: Ollama's (`llm.OllamaLLM`) or the OpenAI-compatible
chat API's (`llm_openai.OpenAICompatibleLLM`). A module of its own, so that neither client module
imports the other."""

from __future__ import annotations

from .config import RAGSettings
from .llm import LLMClient, OllamaLLM
from .tokens import Calibration


def build_llm(
    settings: RAGSettings, *, base_url: str | None = None, calibration: Calibration | None = None
) -> LLMClient:
    """The client of LLM_PROVIDER."""
    if settings.llm_provider == "openai":
        from .llm_openai import OpenAICompatibleLLM  # its client library loads only when used

        return OpenAICompatibleLLM(settings, base_url=base_url, calibration=calibration)
    return OllamaLLM(settings, base_url=base_url, calibration=calibration)
