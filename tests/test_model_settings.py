"""The model settings: RAG_MODELS (the allowlist with each model's context window and response
limit), CHAT_MODEL, LLM_PROVIDER / LLM_BASE_URL. Parsed and checked when the settings are built, so
a bad value stops the start with a sentence naming it; the limits reach the prompt budget and the
model server's request."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragchat.fake_ollama import FakeOllama
from ragchat.services.budget import TokenBudget
from ragchat.services.config import DEFAULT_RAG_MODELS, ModelLimits, RAGSettings, SettingsError, parse_models
from ragchat.services.llm import OllamaLLM
from ragchat.services.types import ChatMessage

ROOT = Path(__file__).resolve().parent.parent


def test_the_default_allowlist_is_the_three_models_of_the_spec():
    assert RAGSettings().models == {
        "llama3.2": ModelLimits(8192, 1024),
        "qwen3:8b": ModelLimits(32768, 2048),
        "deepseek-r1:32b": ModelLimits(65536, 4096),
    }
    assert RAGSettings().rag_models == DEFAULT_RAG_MODELS


def test_rag_models_is_read_from_the_environment_spaces_and_all():
    settings = RAGSettings.from_env(
        {
            "RAG_MODELS": " mistral-small3.2:24b = 32768/2048 , Qwen/Qwen2.5-7B-Instruct=16384/1024,",
            "CHAT_MODEL": "mistral-small3.2:24b ",
        }
    )
    assert settings.models == {
        "mistral-small3.2:24b": ModelLimits(32768, 2048),
        "Qwen/Qwen2.5-7B-Instruct": ModelLimits(16384, 1024),
    }
    assert settings.chat_model == "mistral-small3.2:24b"
    assert settings.allowlisted_model("Qwen/Qwen2.5-7B-Instruct:latest") == "Qwen/Qwen2.5-7B-Instruct"
    assert settings.model_limits("llama3.2") is None  # no longer listed


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("llama3.2", "RAG_MODELS entry 'llama3.2' is not NAME=CONTEXT_WINDOW/MAX_RESPONSE"),
        ("llama3.2=8192", "RAG_MODELS entry 'llama3.2=8192' is not NAME=CONTEXT_WINDOW/MAX_RESPONSE"),
        ("llama3.2=8192/1024,qwen3:8b=32k/2k", "RAG_MODELS entry 'qwen3:8b=32k/2k' is not"),
        ("=8192/1024", "RAG_MODELS entry '=8192/1024' is not"),
        ("llama3.2=1024/8192", "RAG_MODELS entry 'llama3.2=1024/8192': the response limit must be above 0 and below"),
        ("llama3.2=8192/0", "the response limit must be above 0"),
        ("llama3.2=8192/1024,llama3.2:latest=4096/512", "RAG_MODELS names the model 'llama3.2:latest' twice"),
        (" , ", "RAG_MODELS lists no model"),
    ],
)
def test_a_bad_rag_models_entry_is_named(value, message):
    with pytest.raises(SettingsError) as raised:
        parse_models(value)
    assert message in str(raised.value)
    with pytest.raises(SettingsError, match="RAG_MODELS"):
        RAGSettings.from_env({"RAG_MODELS": value})


def test_the_default_chat_model_must_be_listed():
    with pytest.raises(SettingsError) as raised:
        RAGSettings.from_env({"RAG_MODELS": "mistral=32768/2048"})
    assert str(raised.value) == (
        "CHAT_MODEL 'llama3.2' is not in RAG_MODELS (mistral): add it, e.g. "
        "RAG_MODELS=mistral=32768/2048,llama3.2=8192/1024"
    )
    # `llama3.2:latest` names the listed `llama3.2`.
    assert RAGSettings.from_env({"CHAT_MODEL": "llama3.2:latest"}).allowlisted_model("llama3.2:latest") == "llama3.2"


def test_provider_settings_are_checked():
    with pytest.raises(SettingsError, match="LLM_PROVIDER 'vllm': expected one of ollama, openai"):
        RAGSettings.from_env({"LLM_PROVIDER": "vllm"})
    with pytest.raises(SettingsError, match="LLM_PROVIDER=openai needs LLM_BASE_URL"):
        RAGSettings.from_env({"LLM_PROVIDER": "openai"})
    openai = RAGSettings.from_env({"LLM_PROVIDER": "openai", "LLM_BASE_URL": "http://gpu-box:8000/v1/"})
    assert openai.llm_url == "http://gpu-box:8000/v1"
    assert RAGSettings.from_env({"OLLAMA_BASE_URL": "http://ollama:11434"}).llm_url == "http://ollama:11434"
    assert RAGSettings.from_env({"LLM_BASE_URL": "http://other:11434"}).llm_url == "http://other:11434"


def test_a_number_that_is_not_one_is_named():
    with pytest.raises(SettingsError, match="RAG_MAX_RESPONSE_TOKENS='lots' is not a whole number"):
        RAGSettings.from_env({"RAG_MAX_RESPONSE_TOKENS": "lots"})
    # A float setting whose default is written as a whole number still reads decimals.
    assert RAGSettings.from_env({"RAG_TIMEOUT_SECONDS": "2.5"}).rag_timeout_seconds == 2.5


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RAG_MODELS": "llama3.2=8k/1k"}, "RAG_MODELS entry 'llama3.2=8k/1k' is not NAME=CONTEXT_WINDOW/MAX_RESPONSE"),
        ({"CHAT_MODEL": "mistral"}, "CHAT_MODEL 'mistral' is not in RAG_MODELS (llama3.2, qwen3:8b, deepseek-r1:32b)"),
    ],
)
def test_the_server_does_not_start_with_a_bad_model_setting(env, message, tmp_path):
    """`manage.py check` (as any start) stops with Django's ImproperlyConfigured and the sentence."""
    clean = {k: v for k, v in os.environ.items() if k not in {"RAG_MODELS", "CHAT_MODEL", "LLM_PROVIDER"}}
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "ragchat.settings", "RAGCHAT_DATA_DIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: ") and message in last, done.stderr


def test_the_example_env_file_makes_working_settings(tmp_path):
    """.env.example copied to .env as it is (the README's first step) gives settings that start."""
    project = tmp_path / "project"
    (project / "ragchat").mkdir(parents=True)
    shutil.copy(ROOT / "ragchat" / "settings.py", project / "ragchat" / "settings.py")
    shutil.copy(ROOT / ".env.example", project / ".env")
    example = set(re.findall(r"^([A-Z][A-Z0-9_]*)=", (ROOT / ".env.example").read_text(), re.MULTILINE))
    clean = {k: v for k, v in os.environ.items() if k not in example and k != "DJANGO_SETTINGS_MODULE"}
    code = (
        "import runpy, sys\n"
        "rag = runpy.run_path(sys.argv[1])['RAG']\n"
        "print(rag.llm_provider, rag.embedding_backend, rag.embedding_model, ','.join(rag.models), rag.chat_model)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(project / "ragchat" / "settings.py")],
        cwd=tmp_path,
        env={**clean, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "ollama",
        "local",
        "all-MiniLM-L6-v2",
        "llama3.2,qwen3:8b,deepseek-r1:32b",
        "llama3.2",
    ]


def test_the_limits_reach_the_budget_and_the_request(fake_ollama: FakeOllama):
    """A model added by RAG_MODELS gets its own context window (the prompt budget, Ollama's num_ctx)
    and response limit (num_predict)."""
    settings = RAGSettings(
        ollama_base_url=fake_ollama.url, rag_models="mistral=16384/600,llama3.2=8192/1024", chat_model="mistral"
    )
    assert TokenBudget("mistral:latest", settings).context_window == 16384
    with pytest.raises(KeyError, match="RAG_MODELS"):
        TokenBudget("qwen3:8b", settings)
    fake_ollama.models(["mistral"])

    async def ask() -> str:
        llm = OllamaLLM(settings)
        return "".join([p async for p in llm.stream(messages=[ChatMessage("user", "Hi?")], model="mistral")])

    fake_ollama.reply("Hello.")
    assert asyncio.run(ask()) == "Hello."
    options = fake_ollama.requests_to("/api/chat")[0].options
    assert (options["num_ctx"], options["num_predict"]) == (16384, 600)
