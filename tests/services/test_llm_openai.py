"""OpenAICompatibleLLM (LLM_PROVIDER=openai) against the test server's OpenAI-compatible endpoints
(`/v1/models`, `/v1/chat/completions` as server-sent events) over real HTTP, through langchain-openai
and the openai SDK unmodified: the same contract as the Ollama client (tests/services/test_llm.py).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from ragchat.fake_ollama import FakeOllama
from ragchat.services.config import RAGSettings
from ragchat.services.errors import (
    LLMConnectionError,
    LLMResponseError,
    LLMTimeoutError,
    ModelNotAllowedError,
    ModelUnavailableError,
)
from ragchat.services.llm import LANE_STREAMS, OllamaLLM, Usage
from ragchat.services.llm_openai import OpenAICompatibleLLM
from ragchat.services.llm_provider import build_llm
from ragchat.services.tokens import Calibration
from ragchat.services.types import ChatMessage

TIMEOUT = 2.0  # the stall guard of these tests: a busy 2-core machine may delay a piece by a second
SLACK = 1.5  # a shared 2-core machine; the point is "about TIMEOUT", not "eventually"
CHAT = "/v1/chat/completions"
# A model no default knows: RAG_MODELS is what makes it allowed, with its own limits.
SMALL = "qwen2.5-0.5b-instruct"
MODELS = f"{SMALL}=4096/512,llama3.2=8192/1024"

QUESTION = [
    ChatMessage(role="system", content="Answer from the context only."),
    ChatMessage(role="user", content="How many vacation days do I get?"),
]


@pytest.fixture
def settings(fake_ollama: FakeOllama) -> RAGSettings:
    fake_ollama.models([SMALL, "llama3.2"])
    return RAGSettings(
        llm_provider="openai",
        llm_base_url=f"{fake_ollama.url}/v1",
        rag_models=MODELS,
        chat_model=SMALL,
        rag_timeout_seconds=TIMEOUT,
        rag_retry_initial_delay=0.01,
        rag_retry_max_delay=0.02,
    )


@pytest.fixture
def llm(settings: RAGSettings) -> OpenAICompatibleLLM:
    client = build_llm(settings, calibration=Calibration())
    assert isinstance(client, OpenAICompatibleLLM)
    return client


async def collect(llm: OpenAICompatibleLLM, model: str = SMALL, **kwargs) -> list[str]:
    return [piece async for piece in llm.stream(messages=QUESTION, model=model, **kwargs)]


async def wait_for_disconnect(fake: FakeOllama, within: float = 2.0) -> None:
    deadline = time.monotonic() + within
    while fake.disconnects == 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert fake.disconnects == 1


def test_the_provider_setting_picks_the_client(fake_ollama: FakeOllama) -> None:
    assert type(build_llm(RAGSettings(ollama_base_url=fake_ollama.url))) is OllamaLLM
    openai = build_llm(RAGSettings(llm_provider="openai", llm_base_url=f"{fake_ollama.url}/v1/"))
    assert type(openai) is OpenAICompatibleLLM and openai.base_url == f"{fake_ollama.url}/v1"


async def test_stream_yields_pieces_in_order_with_the_request_the_settings_make(
    fake_ollama: FakeOllama, llm: OpenAICompatibleLLM
) -> None:
    fake_ollama.reply("You get twenty five days [SourceId: 550e8400-e29b-41d4-a716-446655440000:0].")
    pieces = await collect(llm)
    assert "".join(pieces) == "You get twenty five days [SourceId: 550e8400-e29b-41d4-a716-446655440000:0]."
    assert pieces[:3] == ["You", " ", "get"] and all(pieces)
    [request] = fake_ollama.requests_to(CHAT)
    body = request.body
    assert body["model"] == SMALL and body["stream"] is True
    assert body["messages"] == [
        {"role": "system", "content": "Answer from the context only."},
        {"role": "user", "content": "How many vacation days do I get?"},
    ]
    # `max_tokens` (which every server reads), capped by the model's RAG_MODELS response limit.
    assert body["max_tokens"] == 512 and "max_completion_tokens" not in body
    assert body["temperature"] == pytest.approx(0.1)
    assert body["stream_options"] == {"include_usage": True}
    assert fake_ollama.requests_to("/api/chat") == []


async def test_usage_chunk_is_reported_and_calibrates(fake_ollama: FakeOllama, llm: OpenAICompatibleLLM) -> None:
    fake_ollama.reply("Twenty five days.")
    usages: list[Usage] = []
    long_question = [ChatMessage(role="user", content="Tell me about vacation policy. " * 20)]
    async for _ in llm.stream(messages=long_question, model=SMALL, on_usage=usages.append):
        pass
    [usage] = usages
    expected_prompt = fake_ollama.count_tokens(long_question[0].content) + 4
    assert (usage.prompt_tokens, usage.completion_tokens, usage.done_reason) == (expected_prompt, 5, "stop")
    counter = llm.token_counter(SMALL)
    assert counter.base_url is None  # the protocol has no tokenize endpoint: calibrated estimates
    assert counter.chars_per_token() == pytest.approx(usage.prompt_chars / expected_prompt)


async def test_an_answer_cut_at_the_limit_reports_length(fake_ollama: FakeOllama, llm: OpenAICompatibleLLM) -> None:
    fake_ollama.reply("one two three four five six")
    usages: list[Usage] = []
    assert "".join(await collect(llm, max_tokens=3, on_usage=usages.append)) == "one two"
    assert fake_ollama.requests_to(CHAT)[0].body["max_tokens"] == 3
    assert usages[0].done_reason == "length"


async def test_an_api_key_is_sent_as_the_bearer_token(fake_ollama: FakeOllama, settings: RAGSettings) -> None:
    fake_ollama.require_api_key("s3cret")
    fake_ollama.reply("Authorised.")
    with pytest.raises(LLMResponseError, match="HTTP 401"):
        await collect(build_llm(settings))
    keyed = build_llm(replace(settings, llm_api_key="s3cret"))
    assert "".join(await collect(keyed)) == "Authorised."
    assert await keyed.validate_model(SMALL) == SMALL  # GET /v1/models carries it too


async def test_slow_first_token_times_out_within_rag_timeout(fake_ollama: FakeOllama, llm: OpenAICompatibleLLM) -> None:
    fake_ollama.first_token_delay(10)
    started = time.monotonic()
    with pytest.raises(LLMTimeoutError):
        await collect(llm)
    assert TIMEOUT * 0.9 <= time.monotonic() - started < TIMEOUT + SLACK
    assert len(fake_ollama.requests_to(CHAT)) == 1  # a timeout is not retried
    await wait_for_disconnect(fake_ollama)


async def test_mid_stream_stall_times_out_and_closes_the_connection(
    fake_ollama: FakeOllama, llm: OpenAICompatibleLLM
) -> None:
    fake_ollama.reply("one two three four five six")
    fake_ollama.stall_after(4, 10)
    received: list[str] = []
    started = time.monotonic()
    with pytest.raises(LLMTimeoutError):
        async for piece in llm.stream(messages=QUESTION, model=SMALL):
            received.append(piece)
    assert received == ["one", " ", "two", " "]
    assert time.monotonic() - started < TIMEOUT + SLACK
    await wait_for_disconnect(fake_ollama)


async def test_slow_but_steady_stream_is_not_a_timeout(fake_ollama: FakeOllama, llm: OpenAICompatibleLLM) -> None:
    fake_ollama.reply("a b c d")  # 7 pieces, 6 gaps of TIMEOUT/4
    fake_ollama.token_delay(TIMEOUT / 4)
    started = time.monotonic()
    assert "".join(await collect(llm)) == "a b c d"
    assert time.monotonic() - started > TIMEOUT


async def test_consumer_leaving_early_closes_the_connection(fake_ollama: FakeOllama, llm: OpenAICompatibleLLM) -> None:
    fake_ollama.reply("one two three four five six")
    fake_ollama.token_delay(0.5)
    stream = llm.stream(messages=QUESTION, model=SMALL)
    assert await stream.__anext__() == "one"
    await stream.aclose()
    await wait_for_disconnect(fake_ollama)


async def test_connection_refused_is_a_connection_error_at_once(
    fake_ollama: FakeOllama, llm: OpenAICompatibleLLM
) -> None:
    fake_ollama.refuse_connections()
    started = time.monotonic()
    with pytest.raises(LLMConnectionError, match="Cannot connect to the OpenAI-compatible server"):
        await collect(llm)
    with pytest.raises(LLMConnectionError):
        await llm.validate_model(SMALL)
    assert time.monotonic() - started < 1.0  # refusals are not retried


async def test_server_errors_are_retried_before_the_first_token(
    fake_ollama: FakeOllama, llm: OpenAICompatibleLLM
) -> None:
    fake_ollama.reply("Recovered.")
    fake_ollama.fail_with(status=503, times=2)
    assert "".join(await collect(llm)) == "Recovered."
    assert len(fake_ollama.requests_to(CHAT)) == 3
    fake_ollama.reset()
    fake_ollama.models([SMALL])
    fake_ollama.fail_with(status=500, times=None, message="CUDA out of memory")
    with pytest.raises(LLMResponseError, match="HTTP 500.*CUDA out of memory"):
        await collect(llm)
    assert len(fake_ollama.requests_to(CHAT)) == 1 + 3  # first try + RAG_RETRY_ATTEMPTS


async def test_400_is_not_retried(fake_ollama: FakeOllama, llm: OpenAICompatibleLLM) -> None:
    fake_ollama.fail_with(status=400, times=None)
    with pytest.raises(LLMResponseError, match="HTTP 400"):
        await collect(llm)
    assert len(fake_ollama.requests_to(CHAT)) == 1


async def test_an_error_event_after_the_first_token_is_not_retried(
    fake_ollama: FakeOllama, llm: OpenAICompatibleLLM
) -> None:
    fake_ollama.reply("one two three")
    fake_ollama.error_mid_stream(after_tokens=2, message="slot context shift failed")
    received: list[str] = []
    with pytest.raises(LLMResponseError, match="failed while answering.*slot context shift failed"):
        async for piece in llm.stream(messages=QUESTION, model=SMALL):
            received.append(piece)
    assert received == ["one", " "]
    assert len(fake_ollama.requests_to(CHAT)) == 1


async def test_a_stream_ended_without_a_finish_reason_is_an_error(
    fake_ollama: FakeOllama, llm: OpenAICompatibleLLM
) -> None:
    """`[DONE]` with no finish reason: how llama-cpp-python's server ends a stream that a newer
    request interrupted. The cut answer is an error, not a whole answer."""
    fake_ollama.reply("one two three")
    fake_ollama.cut_stream_after(3)
    received: list[str] = []
    with pytest.raises(LLMResponseError, match="ended the answer of 'qwen2.5-0.5b-instruct' without finishing it"):
        async for piece in llm.stream(messages=QUESTION, model=SMALL):
            received.append(piece)
    assert received == ["one", " ", "two"]
    fake_ollama.cut_stream_after(0)
    with pytest.raises(LLMResponseError):
        await llm.complete(prompt="Say something", model=SMALL)


async def test_unknown_model_is_model_unavailable(fake_ollama: FakeOllama, llm: OpenAICompatibleLLM) -> None:
    fake_ollama.models([SMALL])
    with pytest.raises(ModelUnavailableError, match="does not exist"):
        await collect(llm, "llama3.2")
    assert len(fake_ollama.requests_to(CHAT)) == 1  # 404 is not retried
    with pytest.raises(ModelUnavailableError, match="Load 'llama3.2' in the server"):
        await llm.validate_model("llama3.2")
    assert await llm.validate_model(SMALL) == SMALL
    assert await llm.validate_model(f"{SMALL}:latest") == SMALL  # a missing tag means :latest


async def test_a_model_outside_rag_models_is_not_allowed(fake_ollama: FakeOllama, llm: OpenAICompatibleLLM) -> None:
    with pytest.raises(ModelNotAllowedError, match="qwen3:8b"):
        await llm.validate_model("qwen3:8b")  # a default model, but not in this RAG_MODELS
    assert fake_ollama.requests == []  # the allowlist is checked before asking the server


async def test_a_base_url_without_the_api_root_says_so(fake_ollama: FakeOllama, settings: RAGSettings) -> None:
    llm = build_llm(replace(settings, llm_base_url=fake_ollama.url))  # no /v1
    with pytest.raises(LLMResponseError, match=r"/models answered HTTP 404: is LLM_BASE_URL the API's root"):
        await llm.validate_model(SMALL)
    assert "is LLM_BASE_URL the API's root" in (await llm.health())["error"]


async def test_validate_model_caches_the_model_list(fake_ollama: FakeOllama, llm: OpenAICompatibleLLM) -> None:
    for _ in range(3):
        await llm.validate_model(SMALL)
    assert len(fake_ollama.requests_to("/v1/models")) == 1
    assert fake_ollama.requests_to("/api/tags") == []


async def test_complete_and_rate(fake_ollama: FakeOllama, llm: OpenAICompatibleLLM) -> None:
    fake_ollama.reply("Plain answer.")
    fake_ollama.rating("I would say 85 out of 100")
    assert await llm.complete(prompt="Say something", model=SMALL) == "Plain answer."
    assert await llm.rate(prompt="Evaluate ...\nRate the support level from 0-100:\n...", model=SMALL) == 85
    assert fake_ollama.requests_to(CHAT)[-1].body["max_tokens"] <= 32


async def test_health_shows_the_provider_models_and_allowlist(
    fake_ollama: FakeOllama, llm: OpenAICompatibleLLM
) -> None:
    health = await llm.health()
    assert health["provider"] == "openai" and health["base_url"] == f"{fake_ollama.url}/v1"
    assert health["reachable"] is True and health["ok"] is True and health["missing"] == []
    assert health["models"] == [f"{SMALL}:latest", "llama3.2:latest"]
    assert health["default_model"] == SMALL
    assert health["allowlist"] == {
        SMALL: {"context_window": 4096, "max_response": 512},
        "llama3.2": {"context_window": 8192, "max_response": 1024},
    }
    fake_ollama.models(["llama3.2"])
    assert (await llm.health())["missing"] == [SMALL]
    fake_ollama.refuse_connections()
    down = await llm.health()
    assert down["reachable"] is False and down["ok"] is False and "Cannot connect" in down["error"]


async def test_a_burst_of_streams_is_spread_over_lanes(fake_ollama: FakeOllama, llm: OpenAICompatibleLLM) -> None:
    fake_ollama.reply("one two three four five")
    fake_ollama.token_delay(0.05)
    n = LANE_STREAMS + 4
    results = await asyncio.gather(*(collect(llm) for _ in range(n)))
    assert all("".join(r) == "one two three four five" for r in results)
    lanes = llm._lanes[asyncio.get_running_loop()][(SMALL, 512)]
    assert [lane.streams for lane in lanes] == [0, 0]


def test_the_sdk_still_parses_chunks_where_the_client_hands_them_on_as_dicts() -> None:
    """llm_openai._ChunksAsDicts overrides the SDK's one parsing step (a quarter of the event loop
    per streamed piece otherwise): if a new SDK renamed it, answers would still work, only slower,
    so this says so."""
    import inspect

    import openai

    parameters = inspect.signature(openai.AsyncOpenAI._process_response_data).parameters
    assert {"data", "cast_to", "response"} <= set(parameters)
