"""The only place that talks to the model server for generation: streaming chat, completion,
rating, model validation and health, over one of two protocols (LLM_PROVIDER): Ollama's
(`OllamaLLM`, here) or the OpenAI-compatible chat API (`OpenAICompatibleLLM`, llm_openai.py).
`llm_provider.build_llm(settings)` makes the configured one.

`LLMClient` holds what both share, so each rule has one home: lanes of connection pools, the
per-chunk deadline, retries before the first token, usage counts, the allowlist and limits
(RAG_MODELS), model validation against the server's list, rating, health. A provider adds the
LangChain chat model it streams through, how it lists the server's models and how it names errors.

Facts about the clients this is built on:
- the ollama client has no timeout unless given one, so a stalled stream would hang forever: we
  pass one to the client AND bound the wait for every chunk with `asyncio.timeout`, so a stall before
  the first token or between tokens raises LLMTimeoutError within RAG_TIMEOUT_SECONDS; cancelling
  the read closes the HTTP connection;
- `num_predict` and `num_ctx` are set explicitly (langchain-ollama's documented defaults are stale);
- usage counts arrive only on the final chunk: they go to `on_usage` and calibrate token estimates;
- qwen3 / deepseek-r1 get `reasoning=False`, or their thinking lands in the answer.

Errors: connection problems → LLMConnectionError, 404 → ModelUnavailableError, no chunk in time →
LLMTimeoutError, anything else the server reports (5xx after retries, in-stream errors) →
LLMResponseError. Transient errors are retried only before the first token was yielded, and never
past the deadline.

References: "spec v3": docs/specs/rag-service-spec-v3-FINAL.md.
"""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
import time
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from .config import REASONING_MODELS, RAGSettings, canonical_model_name
from .errors import (
    LLMConnectionError,
    LLMResponseError,
    LLMTimeoutError,
    ModelNotAllowedError,
    ModelUnavailableError,
    RAGServiceError,
)
from .reasoning import after_thinking
from .retry import RetryPolicy, is_transient_error, retry_async, status_code_of
from .tokens import Calibration, TokenCounter, default_calibration
from .types import ChatMessage

log = logging.getLogger("ragchat.llm")

TAGS_CACHE_SECONDS = 30.0
RATE_MAX_TOKENS = 32
# Concurrent connections to the model server per process (one per streaming answer): far above
# httpx's 100.
LLM_MAX_CONNECTIONS = 1000
# Streams per lane (one chat model, so one httpx connection pool). httpcore scans every connection
# of its pool, with a socket check each, whenever a request starts or ends: one pool carrying a
# burst of 200 streams spent about 2.5 s of the event loop in that scan alone (py-spy, bench
# 200-question burst). Lanes of 16 keep each scan short; a lane is made only when all are full.
LANE_STREAMS = 16


@dataclass
class _Lane:
    """One chat model (its own connection pool) and how many streams use it now."""

    model: Any
    streams: int = 0


@dataclass(frozen=True)
class Usage:
    """What the server reports about one generation (Ollama's final chunk, the OpenAI API's usage
    chunk when the server sends one)."""

    model: str
    prompt_tokens: int | None
    completion_tokens: int | None
    done_reason: str | None
    prompt_chars: int
    total_duration_ms: float | None = None


def model_present(model: str, available: Sequence[str]) -> bool:
    """Spec v3 fix: compare WITH the tag (missing tag = `:latest`); spec v3 stripped tags, so
    `qwen3:8b` never matched, and `qwen3:14b` being pulled would have passed for `qwen3:8b`."""
    wanted = canonical_model_name(model)
    return any(canonical_model_name(name) == wanted for name in available)


def is_reasoning_model(model: str) -> bool:
    return model.rsplit("/", 1)[-1].split(":", 1)[0].startswith(REASONING_MODELS)


# Ratings as models write them, tried in this order: "8/10" or "85 out of 100"; "85%"; a labelled
# number ("Rating: 85", "Confidence: 0.85"); the first other number that is not a year; words.
_SCALED_RE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(?:/|out\s+of)\s*(100|10|5)\b", re.IGNORECASE)
_PERCENT_RE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*%")
_LABELLED_RE = re.compile(
    r"\b(?:rating|score|confidence|rate|support)\b[^\d\n]{0,24}?(?<![\w.])(\d+(?:\.\d+)?)(?![\w.])",
    re.IGNORECASE,
)
_PLAIN_NUMBER_RE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?![\w]|\.\d)")
_YEAR_RE = re.compile(r"(?:19|20)\d\d")
_RATING_WORDS: tuple[tuple[re.Pattern[str], int], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), score)
    for pattern, score in (
        (r"\bnot\s+(?:very\s+|well\s+|fully\s+|strongly\s+|entirely\s+)", 35),
        (r"\b(?:not\s+(?:at\s+all\s+)?supported|unsupported|no\s+support|not\s+grounded|none)\b", 10),
        (r"\b(?:fully|completely|entirely|strongly|well|very\s+high|high|excellent)\b", 90),
        (r"\b(?:mostly|largely|good|mainly)\b", 75),
        (r"\b(?:partially|partly|partial|moderate(?:ly)?|medium|some(?:what)?)\b", 55),
        (r"\b(?:weak(?:ly)?|low|poor(?:ly)?|barely|little|minimal(?:ly)?)\b", 35),
    )
)


def parse_rating(text: str) -> int | None:
    """The 0-100 rating in a reply written the way models write it (thinking removed); None if
    it holds none."""
    text = after_thinking(text)
    value: float | None = None
    if m := _SCALED_RE.search(text):
        value = float(m.group(1)) * 100 / int(m.group(2))
    elif m := _PERCENT_RE.search(text) or _LABELLED_RE.search(text):
        value = float(m.group(1))
    else:
        for m in _PLAIN_NUMBER_RE.finditer(text):
            if not _YEAR_RE.fullmatch(m.group(1)):
                value = float(m.group(1))
                break
    if value is not None:
        if "." in (m.group(1) if m else "") and value <= 1:
            value *= 100  # "0.85"
        return max(0, min(100, round(value)))
    for pattern, score in _RATING_WORDS:
        if pattern.search(text):
            return score
    return None


def import_model_clients() -> None:
    """Load the model client library (langchain-ollama, ~0.7 s): the server does it at start-up
    (ragchat.runtime.start), so the first question does not pay it; a manage.py command that asks
    no model never does."""
    import langchain_ollama  # noqa: F401


def _to_langchain(messages: Sequence[ChatMessage]) -> list[Any]:
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

    kinds: dict[str, type[BaseMessage]] = {
        "system": SystemMessage,
        "user": HumanMessage,
        "assistant": AIMessage,
    }
    return [kinds[m.role](content=m.content) for m in messages]


def map_transport_error(
    e: BaseException, *, server: str, model: str, base_url: str, reason: str, in_stream: bool = False
) -> RAGServiceError:
    """A client's exception as the product's error, for either protocol: `server` names it in the
    message ("Ollama", "the OpenAI-compatible server"), `reason` is what it said, `in_stream` tells
    an error sent inside a stream that had begun."""
    if isinstance(e, RAGServiceError):
        return e
    code = status_code_of(e)
    if code == 404:
        return ModelUnavailableError(f"Model '{model}' not available in {server} ({reason}).")
    if in_stream or (code is not None and code < 0):  # e.g. Ollama's `{"error": ...}` line
        return LLMResponseError(f"{_capital(server)} failed while answering with '{model}': {reason}")
    if code is not None:
        return LLMResponseError(f"{_capital(server)} answered HTTP {code} for model '{model}': {reason}")
    if isinstance(e, httpx.ConnectTimeout | httpx.PoolTimeout):
        return LLMConnectionError(f"Cannot connect to {server} at {base_url}: connect timed out")
    if isinstance(e, httpx.TimeoutException):
        return LLMTimeoutError(f"{_capital(server)} did not answer in time: {e!r}")
    if isinstance(e, ConnectionError | httpx.TransportError | OSError):
        return LLMConnectionError(f"Cannot connect to {server} at {base_url}: {e}")
    return LLMResponseError(f"Malformed answer from {server} for model '{model}': {e!r}")


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _reason(e: BaseException) -> str:
    return str(getattr(e, "error", None) or e)


class LLMClient:
    """What every provider shares (see the module docstring); subclasses fill in the hooks below."""

    provider = ""  # LLM_PROVIDERS value
    server = ""  # how messages name the server

    def __init__(
        self,
        settings: RAGSettings,
        *,
        base_url: str | None = None,
        calibration: Calibration | None = None,
        tags_cache_seconds: float = TAGS_CACHE_SECONDS,
    ) -> None:
        self.settings = settings
        self.base_url = (base_url or settings.llm_url).rstrip("/")
        self.calibration = calibration if calibration is not None else default_calibration
        self.retry_policy = RetryPolicy.from_settings(settings)
        self.tags_cache_seconds = tags_cache_seconds
        self._tags_cache: tuple[float, tuple[str, ...]] | None = None
        # Chat models (each with its httpx clients) kept per event loop, because pooled connections
        # belong to the loop that opened them, in lanes of at most LANE_STREAMS streams each.
        self._lanes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, int], list[_Lane]]] = (
            weakref.WeakKeyDictionary()
        )
        self._ssl_context: ssl.SSLContext | None = None  # one for every lane: loading CA certificates is slow

    # ---- provider hooks -------------------------------------------------------------------
    def _chat_model(self, model: str, num_predict: int) -> Any:
        """A LangChain chat model streaming `model`'s answers of at most `num_predict` tokens."""
        raise NotImplementedError

    async def _fetch_models(self) -> tuple[str, ...]:
        """The names of the models the server can answer with now (one HTTP call, retried)."""
        raise NotImplementedError

    def _map_error(self, e: BaseException, *, model: str) -> RAGServiceError:
        return map_transport_error(e, server=self.server, model=model, base_url=self.base_url, reason=_reason(e))

    def _is_transient(self, e: BaseException) -> bool:
        return is_transient_error(e)

    def _unavailable_hint(self, model: str) -> str:
        """What an admin does about an allowed model the server does not have."""
        return f"Load '{model}' in the server at {self.base_url} or remove it from RAG_MODELS."

    def _required_models(self) -> list[str]:
        return [self.settings.chat_model]

    def _client_timeout(self) -> httpx.Timeout:
        """Backstop for the per-chunk wait of `stream` (which fires first, just under this)."""
        timeout = self.settings.rag_timeout_seconds
        return httpx.Timeout(timeout + 5.0, connect=min(timeout, 5.0))

    def _client_limits(self) -> httpx.Limits:
        # httpx allows 100 connections per client by default: the 101st concurrent stream of a client
        # waited for a free connection (up to the timeout) before its request was even sent. Lanes
        # spread streams, this keeps a miscount from ever queueing one. Servers queue requests
        # themselves (OLLAMA_NUM_PARALLEL, vLLM's scheduler, llama.cpp's slots).
        return httpx.Limits(max_connections=LLM_MAX_CONNECTIONS, max_keepalive_connections=100)

    def _ssl(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            self._ssl_context = httpx.create_ssl_context()
        return self._ssl_context

    # ---- token counting -------------------------------------------------------------------
    def token_counter(self, model: str | None = None) -> TokenCounter:
        """A counter calibrated by this client's generations (estimates; no exact counts)."""
        key = self.settings.allowlisted_model(model) if model else None
        return TokenCounter(key or model, calibration=self.calibration)

    # ---- generation -----------------------------------------------------------------------
    def limits(self, model: str) -> tuple[int, int]:
        """(context window, response limit) for the model: its RAG_MODELS entry, the response
        budget capped by what the model may produce."""
        limits = self.settings.model_limits(model)
        context_window, max_response = (limits.context_window, limits.max_response) if limits else (8192, 1024)
        return context_window, min(self.settings.rag_max_response_tokens, max_response)

    def _lane(self, model: str, num_predict: int) -> _Lane:
        """The first lane of this loop with room for one more stream (a new one if all are full)."""
        lanes = self._lanes.setdefault(asyncio.get_running_loop(), {}).setdefault((model, num_predict), [])
        for lane in lanes:
            if lane.streams < LANE_STREAMS:
                return lane
        lane = _Lane(model=self._chat_model(model, num_predict))
        lanes.append(lane)
        return lane

    async def stream(
        self,
        *,
        messages: list[ChatMessage],
        model: str,
        on_usage: Callable[[Usage], None] | None = None,
        max_tokens: int | None = None,
    ) -> AsyncIterator[str]:
        """Yield the answer's text pieces as they arrive; `on_usage` gets the final counts."""
        _, num_predict = self.limits(model)
        if max_tokens is not None:
            num_predict = min(num_predict, max_tokens)
        lane = self._lane(model, num_predict)
        lc_messages = _to_langchain(messages)
        prompt_chars = sum(len(m.content) for m in messages)
        timeout = self.settings.rag_timeout_seconds
        deadline = time.monotonic() + timeout

        async def open_stream() -> tuple[Any, Any]:
            agen = lane.model.astream(lc_messages)
            try:
                return agen, await self._first_chunk(agen, deadline)
            except BaseException:
                await _aclose(agen)
                raise

        lane.streams += 1
        try:
            try:
                agen, chunk = await retry_async(
                    open_stream,
                    policy=self.retry_policy,
                    deadline=deadline,
                    is_transient=self._is_transient,
                    what=f"{self.provider} chat {model}",
                )
            except Exception as e:
                raise self._map_error(e, model=model) from e

            done_reason: str | None = None
            try:
                while chunk is not None:
                    meta = chunk.response_metadata or {}
                    done_reason = meta.get("done_reason") or meta.get("finish_reason") or done_reason
                    self._note_usage(
                        chunk, model=model, prompt_chars=prompt_chars, done_reason=done_reason, on_usage=on_usage
                    )
                    if chunk.content:
                        yield chunk.content
                    try:
                        chunk = await _pull(agen, timeout, limit=timeout)
                    except Exception as e:
                        raise self._map_error(e, model=model) from e
                if done_reason is None:
                    # Both protocols end a whole answer by saying why (stop, length): a stream that
                    # just ends was cut off (llama-cpp-python's server ends the stream a newer
                    # request interrupts that way); stored as complete, it would be a wrong answer.
                    raise LLMResponseError(
                        f"{_capital(self.server)} ended the answer of '{model}' without finishing it"
                    )
            finally:
                await _aclose(agen)
        finally:
            lane.streams -= 1

    async def _first_chunk(self, agen: Any, deadline: float) -> Any:
        """The first chunk with text (or the final one), all within the first-token deadline."""
        while True:
            chunk = await _pull(agen, deadline - time.monotonic(), limit=self.settings.rag_timeout_seconds)
            if chunk is None or chunk.content or chunk.usage_metadata:
                return chunk

    def _note_usage(
        self,
        chunk: Any,
        *,
        model: str,
        prompt_chars: int,
        done_reason: str | None,
        on_usage: Callable[[Usage], None] | None,
    ) -> None:
        usage = chunk.usage_metadata
        if not usage:
            return
        total = (chunk.response_metadata or {}).get("total_duration")
        result = Usage(
            model=model,
            prompt_tokens=usage.get("input_tokens"),
            completion_tokens=usage.get("output_tokens"),
            done_reason=done_reason,
            prompt_chars=prompt_chars,
            total_duration_ms=total / 1e6 if isinstance(total, int | float) else None,
        )
        self.calibration.observe(self.settings.allowlisted_model(model) or model, prompt_chars, result.prompt_tokens)
        log.debug(
            "generation usage",
            extra={
                "model": model,
                "prompt_tokens": result.prompt_tokens,
                "completion_tokens": result.completion_tokens,
                "done_reason": result.done_reason,
            },
        )
        if on_usage is not None:
            on_usage(result)

    async def complete(
        self,
        *,
        prompt: str,
        model: str,
        max_tokens: int | None = None,
        on_usage: Callable[[Usage], None] | None = None,
    ) -> str:
        """The whole reply to one user prompt (same timeouts, retries and error mapping)."""
        parts = [
            piece
            async for piece in self.stream(
                messages=[ChatMessage(role="user", content=prompt)],
                model=model,
                on_usage=on_usage,
                max_tokens=max_tokens,
            )
        ]
        return "".join(parts)

    async def rate(self, *, prompt: str, model: str) -> int:
        """The model's 0-100 answer to CONFIDENCE_PROMPT; unparsable → 0 (logged)."""
        reply = await self.complete(prompt=prompt, model=model, max_tokens=RATE_MAX_TOKENS)
        score = parse_rating(reply)
        if score is None:
            log.warning("unparsable confidence rating, using 0", extra={"reply": reply[:200]})
            return 0
        return score

    # ---- models and health ----------------------------------------------------------------
    async def validate_model(self, model: str) -> str:
        """Allowed (RAG_MODELS) and present on the server; returns the RAG_MODELS name.

        Raises ModelNotAllowedError, ModelUnavailableError, LLMConnectionError.
        """
        key = self.settings.allowlisted_model(model)
        if key is None:
            raise ModelNotAllowedError(f"Model '{model}' not in allowlist. Available: {list(self.settings.models)}")
        names, fresh = await self._available_models()
        if not model_present(key, names) and not fresh:
            names, _ = await self._available_models(force=True)  # maybe loaded since we looked
        if not model_present(key, names):
            raise ModelUnavailableError(f"Model '{key}' not available. {self._unavailable_hint(key)}")
        return key

    async def _available_models(self, *, force: bool = False) -> tuple[tuple[str, ...], bool]:
        """(the server's model names, whether they were just fetched); cached briefly."""
        now = time.monotonic()
        cached = self._tags_cache
        if not force and cached is not None and now - cached[0] < self.tags_cache_seconds:
            return cached[1], False
        names = await self._fetch_models()
        self._tags_cache = (time.monotonic(), names)
        return names, True

    async def _get_json(self, path: str, *, headers: dict[str, str] | None = None) -> Any:
        """GET `path` of the server as JSON, retried like every call; errors as the product's."""
        timeout = min(self.settings.rag_timeout_seconds, 5.0)

        async def fetch() -> Any:
            async with httpx.AsyncClient(base_url=self.base_url, timeout=timeout, headers=headers) as client:
                response = await client.get(path)
                response.raise_for_status()
                return response.json()

        try:
            return await retry_async(
                fetch,
                policy=self.retry_policy,
                what=f"{self.provider} {path}",
                deadline=time.monotonic() + self.settings.rag_timeout_seconds,
            )
        except httpx.RequestError as e:  # spec v3: any request failure is a connection error
            raise LLMConnectionError(f"Cannot connect to {self.server} at {self.base_url}: {e!r}") from e
        except httpx.HTTPStatusError as e:
            raise LLMResponseError(f"{_capital(self.server)} {path} answered HTTP {e.response.status_code}") from e
        except ValueError as e:
            raise LLMResponseError(f"Malformed {path} answer: {e}") from e

    async def health(self, *, required: Sequence[str] | None = None) -> dict[str, Any]:
        """Reachable, models present, required models present, latency, and the configured
        allowlist with its limits. Never raises."""
        if required is None:
            required = self._required_models()
        started = time.perf_counter()
        result: dict[str, Any] = {
            "provider": self.provider,
            "base_url": self.base_url,
            "reachable": False,
            "models": [],
            "required": list(required),
            "missing": list(required),
            "default_model": self.settings.chat_model,
            "allowlist": {name: limits.as_dict() for name, limits in self.settings.models.items()},
        }
        try:
            names, _ = await self._available_models(force=True)
        except RAGServiceError as e:
            result["error"] = str(e)
        else:
            result["reachable"] = True
            result["models"] = list(names)
            result["missing"] = [m for m in required if not model_present(m, names)]
        result["latency_ms"] = round((time.perf_counter() - started) * 1000, 1)
        result["required_model_present"] = result["reachable"] and not result["missing"]
        result["ok"] = result["required_model_present"]
        return result


class OllamaLLM(LLMClient):
    """Generation through langchain-ollama's ChatOllama; model checks and health via the HTTP API."""

    provider = "ollama"
    server = "Ollama"

    def token_counter(self, model: str | None = None) -> TokenCounter:
        """A counter calibrated by this client's generations (and able to prefetch exact counts
        with Ollama's `/api/generate`)."""
        key = self.settings.allowlisted_model(model) if model else None
        return TokenCounter(key or model, base_url=self.base_url, calibration=self.calibration)

    def _chat_model(self, model: str, num_predict: int) -> Any:
        from langchain_ollama import ChatOllama

        num_ctx, _ = self.limits(model)
        return ChatOllama(
            model=model,
            base_url=self.base_url,
            temperature=self.settings.rag_temperature,
            num_ctx=num_ctx,
            num_predict=num_predict,
            reasoning=False if is_reasoning_model(model) else None,
            keep_alive=self.settings.ollama_keep_alive or None,
            client_kwargs={"timeout": self._client_timeout(), "limits": self._client_limits(), "verify": self._ssl()},
        )

    def _map_error(self, e: BaseException, *, model: str) -> RAGServiceError:
        mapped = super()._map_error(e, model=model)
        if isinstance(mapped, ModelUnavailableError) and not isinstance(e, RAGServiceError):
            return ModelUnavailableError(f"{mapped} Run: ollama pull {model}")
        return mapped

    def _unavailable_hint(self, model: str) -> str:
        return f"Run: ollama pull {model}"

    def _required_models(self) -> list[str]:
        required = [self.settings.chat_model]
        if self.settings.embedding_backend == "ollama":
            required.append(self.settings.embedding_model)
        return required

    async def _fetch_models(self) -> tuple[str, ...]:
        data = await self._get_json("/api/tags")
        models = data.get("models") if isinstance(data, dict) else None
        return tuple(
            str(m.get("name") or m.get("model"))
            for m in models or []
            if isinstance(m, dict) and (m.get("name") or m.get("model"))
        )


async def _pull(agen: Any, timeout: float, *, limit: float) -> Any:
    """Next chunk, or None at the end. Waiting longer than `timeout` cancels the read (which
    closes the HTTP connection) and raises LLMTimeoutError (`limit` is the configured value)."""
    try:
        # A timeout scope, not wait_for: wait_for wraps every chunk's read in a task of its own.
        async with asyncio.timeout(max(timeout, 0.0)):
            return await agen.__anext__()
    except StopAsyncIteration:
        return None
    except TimeoutError as e:
        raise LLMTimeoutError(f"No output from the model for {limit:g} s") from e


async def _aclose(agen: Any) -> None:
    try:
        await agen.aclose()
    except Exception:  # closing a broken stream must not hide the error that broke it
        log.debug("closing the model stream failed", exc_info=True)
