"""OllamaLLM against the fake Ollama server over real HTTP, through langchain-ollama unmodified.

References: "spec v3": docs/specs/rag-service-spec-v3-FINAL.md.
"""

from __future__ import annotations

import asyncio
import time

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
from ragchat.services.llm import LANE_STREAMS, OllamaLLM, Usage, model_present, parse_rating
from ragchat.services.tokens import Calibration
from ragchat.services.types import ChatMessage

TIMEOUT = 2.0  # the stall guard of these tests: a busy 2-core machine may delay a piece by a second
# Generous slack for a shared 2-core machine; the point is "about TIMEOUT", not "eventually".
SLACK = 1.5

QUESTION = [
    ChatMessage(role="system", content="Answer from the context only."),
    ChatMessage(role="user", content="How many vacation days do I get?"),
]


@pytest.fixture
def settings(fake_ollama: FakeOllama) -> RAGSettings:
    return RAGSettings(
        ollama_base_url=fake_ollama.url,
        rag_timeout_seconds=TIMEOUT,
        rag_retry_initial_delay=0.01,
        rag_retry_max_delay=0.02,
    )


@pytest.fixture
def llm(settings: RAGSettings) -> OllamaLLM:
    return OllamaLLM(settings, calibration=Calibration())


async def collect(llm: OllamaLLM, model: str = "llama3.2", **kwargs) -> list[str]:
    return [piece async for piece in llm.stream(messages=QUESTION, model=model, **kwargs)]


async def test_stream_yields_pieces_in_order(fake_ollama: FakeOllama, llm: OllamaLLM) -> None:
    fake_ollama.reply("You get twenty five days [SourceId: 550e8400-e29b-41d4-a716-446655440000:0].")
    pieces = await collect(llm)
    assert "".join(pieces) == ("You get twenty five days [SourceId: 550e8400-e29b-41d4-a716-446655440000:0].")
    assert pieces[:3] == ["You", " ", "get"]
    assert all(pieces)  # no empty strings leak out (the final usage chunk has no text)


async def test_stream_reports_usage_from_final_chunk_and_calibrates(
    fake_ollama: FakeOllama,
    llm: OllamaLLM,
) -> None:
    fake_ollama.reply("Twenty five days.")
    usages: list[Usage] = []
    long_question = [ChatMessage(role="user", content="Tell me about vacation policy. " * 20)]
    async for _ in llm.stream(messages=long_question, model="llama3.2", on_usage=usages.append):
        pass
    assert len(usages) == 1
    usage = usages[0]
    expected_prompt = fake_ollama.count_tokens(long_question[0].content) + 4
    assert usage.prompt_tokens == expected_prompt
    assert usage.completion_tokens == 5 and usage.done_reason == "stop"
    assert usage.prompt_chars == len(long_question[0].content)
    counter = llm.token_counter("llama3.2")
    assert counter.is_calibrated
    assert counter.chars_per_token() == pytest.approx(usage.prompt_chars / expected_prompt)


async def test_num_ctx_num_predict_temperature_keep_alive_sent(
    fake_ollama: FakeOllama,
    llm: OllamaLLM,
) -> None:
    await collect(llm, "llama3.2")
    await collect(llm, "qwen3:8b")
    llama, qwen = (r.body for r in fake_ollama.requests_to("/api/chat"))
    assert llama["options"]["num_ctx"] == 8192
    assert llama["options"]["num_predict"] == 1024  # RAG_MAX_RESPONSE_TOKENS, under the cap
    assert llama["options"]["temperature"] == pytest.approx(0.1)
    assert llama["keep_alive"] == "5m"
    assert qwen["options"]["num_ctx"] == 32768


async def test_num_predict_capped_by_model_max_response(fake_ollama: FakeOllama) -> None:
    settings = RAGSettings(ollama_base_url=fake_ollama.url, rag_max_response_tokens=4000)
    llm = OllamaLLM(settings)
    await collect(llm, "llama3.2")
    await collect(llm, "qwen3:8b")
    llama, qwen = (r.body for r in fake_ollama.requests_to("/api/chat"))
    assert llama["options"]["num_predict"] == 1024
    assert qwen["options"]["num_predict"] == 2048


async def test_reasoning_flag_false_for_qwen3_and_not_sent_for_llama(
    fake_ollama: FakeOllama,
    llm: OllamaLLM,
) -> None:
    fake_ollama.reply("Twenty five.")
    answer = "".join(await collect(llm, "qwen3:8b"))
    await collect(llm, "llama3.2")
    qwen, llama = (r.body for r in fake_ollama.requests_to("/api/chat"))
    assert qwen["think"] is False
    assert "think" not in llama
    assert answer == "Twenty five."  # the fake puts <think> in the answer when think is unset


async def test_slow_first_token_times_out_within_rag_timeout(
    fake_ollama: FakeOllama,
    llm: OllamaLLM,
) -> None:
    fake_ollama.first_token_delay(10)
    started = time.monotonic()
    with pytest.raises(LLMTimeoutError):
        await collect(llm)
    elapsed = time.monotonic() - started
    assert TIMEOUT * 0.9 <= elapsed < TIMEOUT + SLACK
    assert len(fake_ollama.requests_to("/api/chat")) == 1  # a timeout is not retried
    await wait_for_disconnect(fake_ollama)


async def test_mid_stream_stall_times_out_within_rag_timeout(
    fake_ollama: FakeOllama,
    llm: OllamaLLM,
) -> None:
    fake_ollama.reply("one two three four five six")
    fake_ollama.stall_after(4, 10)
    received: list[str] = []
    started = time.monotonic()
    with pytest.raises(LLMTimeoutError):
        async for piece in llm.stream(messages=QUESTION, model="llama3.2"):
            received.append(piece)
    elapsed = time.monotonic() - started
    assert received == ["one", " ", "two", " "]
    assert elapsed < TIMEOUT + SLACK
    await wait_for_disconnect(fake_ollama)  # the abandoned HTTP connection was really closed


async def wait_for_disconnect(fake: FakeOllama, within: float = 2.0) -> None:
    deadline = time.monotonic() + within
    while fake.disconnects == 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert fake.disconnects == 1


async def test_slow_but_steady_stream_is_not_a_timeout(fake_ollama: FakeOllama, llm: OllamaLLM) -> None:
    """The limit is per chunk, not for the whole answer."""
    fake_ollama.reply("a b c d")  # 7 pieces, 6 gaps of TIMEOUT/4
    fake_ollama.token_delay(TIMEOUT / 4)
    started = time.monotonic()
    assert "".join(await collect(llm)) == "a b c d"
    assert time.monotonic() - started > TIMEOUT


async def test_connection_refused_raises_llm_connection_error(
    fake_ollama: FakeOllama,
    llm: OllamaLLM,
) -> None:
    fake_ollama.refuse_connections()
    started = time.monotonic()
    with pytest.raises(LLMConnectionError):
        await collect(llm)
    with pytest.raises(LLMConnectionError):
        await llm.complete(prompt="hi", model="llama3.2")
    # refusals are not retried: both calls fail at once, not after the backoff schedule
    assert time.monotonic() - started < 1.0


async def test_http_500_is_retried_then_llm_response_error(
    fake_ollama: FakeOllama,
    llm: OllamaLLM,
) -> None:
    fake_ollama.fail_with(status=500, times=None)
    with pytest.raises(LLMResponseError):
        await collect(llm)
    assert len(fake_ollama.requests_to("/api/chat")) == 1 + 3  # first try + RAG_RETRY_ATTEMPTS


async def test_transient_503_recovers_on_retry(fake_ollama: FakeOllama, llm: OllamaLLM) -> None:
    fake_ollama.reply("Recovered.")
    fake_ollama.fail_with(status=503, times=2)
    assert "".join(await collect(llm)) == "Recovered."
    assert len(fake_ollama.requests_to("/api/chat")) == 3


async def test_400_is_not_retried(fake_ollama: FakeOllama, llm: OllamaLLM) -> None:
    fake_ollama.fail_with(status=400, times=None)
    with pytest.raises(LLMResponseError):
        await collect(llm)
    assert len(fake_ollama.requests_to("/api/chat")) == 1


async def test_error_after_first_token_is_not_retried(fake_ollama: FakeOllama, llm: OllamaLLM) -> None:
    fake_ollama.reply("one two three")
    fake_ollama.error_mid_stream(after_tokens=2, message="model runner crashed")
    received: list[str] = []
    with pytest.raises(LLMResponseError, match="model runner crashed"):
        async for piece in llm.stream(messages=QUESTION, model="llama3.2"):
            received.append(piece)
    assert received == ["one", " "]
    assert len(fake_ollama.requests_to("/api/chat")) == 1


async def test_a_stream_that_just_ends_is_an_error_not_an_answer(fake_ollama: FakeOllama, llm: OllamaLLM) -> None:
    """No final `done` line: the answer was cut off, and is not passed on as a whole one."""
    fake_ollama.reply("one two three")
    fake_ollama.cut_stream_after(3)
    received: list[str] = []
    with pytest.raises(LLMResponseError, match="without finishing it"):
        async for piece in llm.stream(messages=QUESTION, model="llama3.2"):
            received.append(piece)
    assert received == ["one", " ", "two"]


async def test_unknown_model_raises_model_unavailable(fake_ollama: FakeOllama, llm: OllamaLLM) -> None:
    fake_ollama.models(["llama3.2:latest"])
    with pytest.raises(ModelUnavailableError):
        await collect(llm, "qwen3:8b")
    assert len(fake_ollama.requests_to("/api/chat")) == 1  # 404 is not retried


async def test_complete_and_rate(fake_ollama: FakeOllama, llm: OllamaLLM) -> None:
    fake_ollama.reply("Plain answer.")
    fake_ollama.rating(85, "I would say 97.6 out of 100", "no idea", 250)
    assert await llm.complete(prompt="Say something", model="llama3.2") == "Plain answer."
    confidence_prompt = "Evaluate ...\nRate the support level from 0-100:\n..."
    assert await llm.rate(prompt=confidence_prompt, model="llama3.2") == 85
    assert await llm.rate(prompt=confidence_prompt, model="llama3.2") == 98
    assert await llm.rate(prompt=confidence_prompt, model="llama3.2") == 0  # unparsable
    assert await llm.rate(prompt=confidence_prompt, model="llama3.2") == 100  # clamped
    rate_request = fake_ollama.requests_to("/api/chat")[-1].body
    assert rate_request["options"]["num_predict"] <= 32


def test_parse_rating_ignores_thinking() -> None:
    assert parse_rating("<think>maybe 10 or 20</think>\n\n75") == 75
    assert parse_rating("") is None


async def test_validate_model_allowed(fake_ollama: FakeOllama, llm: OllamaLLM) -> None:
    assert await llm.validate_model("llama3.2") == "llama3.2"


async def test_validate_model_not_allowed(fake_ollama: FakeOllama, llm: OllamaLLM) -> None:
    with pytest.raises(ModelNotAllowedError):
        await llm.validate_model("mistral")
    assert fake_ollama.requests == []  # the allowlist is checked before asking Ollama


async def test_validate_model_matches_tags_spec_v3_defect_fix(
    fake_ollama: FakeOllama,
    llm: OllamaLLM,
) -> None:
    """Spec v3 defect fix: spec v3 compared `m["name"].split(":")[0]` with the requested model, so
    `qwen3:8b` and `deepseek-r1:32b` could never be found. Names are compared WITH their tag, a
    missing tag meaning `:latest`."""
    fake_ollama.models(["llama3.2:latest", "qwen3:8b"])
    assert await llm.validate_model("llama3.2") == "llama3.2"
    assert await llm.validate_model("llama3.2:latest") == "llama3.2"
    assert await llm.validate_model("qwen3:8b") == "qwen3:8b"
    with pytest.raises(ModelUnavailableError):
        await llm.validate_model("deepseek-r1:32b")


async def test_validate_model_other_tag_does_not_count_spec_v3_defect_fix(
    fake_ollama: FakeOllama,
    llm: OllamaLLM,
) -> None:
    """Spec v3 defect fix: `qwen3:14b` being pulled does not make `qwen3:8b` available, and
    `llama3.2:1b` is not `llama3.2` (= `llama3.2:latest`)."""
    fake_ollama.models(["qwen3:14b", "llama3.2:1b"])
    for model in ("qwen3:8b", "llama3.2"):
        with pytest.raises(ModelUnavailableError):
            await llm.validate_model(model)
    assert not model_present("qwen3:8b", ["qwen3:14b", "qwen3:latest"])
    assert model_present("llama3.2", ["llama3.2:latest"])


async def test_validate_model_caches_tags(fake_ollama: FakeOllama, llm: OllamaLLM) -> None:
    fake_ollama.models(["llama3.2:latest"])
    for _ in range(5):
        await llm.validate_model("llama3.2")
    assert len(fake_ollama.requests_to("/api/tags")) == 1
    # A miss looks again (once), so a model pulled after the cached answer is found at once.
    with pytest.raises(ModelUnavailableError):
        await llm.validate_model("qwen3:8b")
    assert len(fake_ollama.requests_to("/api/tags")) == 2
    fake_ollama.models(["llama3.2:latest", "qwen3:8b"])
    assert await llm.validate_model("qwen3:8b") == "qwen3:8b"
    assert len(fake_ollama.requests_to("/api/tags")) == 3


async def test_validate_model_connection_refused(fake_ollama: FakeOllama, llm: OllamaLLM) -> None:
    fake_ollama.refuse_connections()
    with pytest.raises(LLMConnectionError):
        await llm.validate_model("llama3.2")


async def test_health_reports_models_and_latency(fake_ollama: FakeOllama, llm: OllamaLLM) -> None:
    health = await llm.health()
    assert health["reachable"] is True and health["ok"] is True
    assert "llama3.2:latest" in health["models"]
    assert health["missing"] == [] and health["latency_ms"] >= 0
    fake_ollama.models(["qwen3:8b"])
    health = await llm.health()
    assert health["reachable"] is True and health["ok"] is False
    assert health["missing"] == ["llama3.2"]
    fake_ollama.refuse_connections()
    health = await llm.health()
    assert health["reachable"] is False and health["ok"] is False and health["error"]


async def test_concurrent_streams_are_independent(fake_ollama: FakeOllama, llm: OllamaLLM) -> None:
    fake_ollama.reply("same answer for all")
    usages: list[Usage] = []
    results = await asyncio.gather(*(collect(llm, on_usage=usages.append) for _ in range(5)))
    assert all("".join(r) == "same answer for all" for r in results)
    assert len(usages) == 5


def _lane_streams(llm: OllamaLLM) -> list[int]:
    lanes = llm._lanes[asyncio.get_running_loop()][("llama3.2", llm.limits("llama3.2")[1])]
    return [lane.streams for lane in lanes]


async def test_a_burst_of_streams_is_spread_over_lanes_of_bounded_size(fake_ollama: FakeOllama) -> None:
    """A burst rides several connection pools of at most LANE_STREAMS streams (one pool for all
    cost the event loop seconds), every stream gets its whole answer, and the lanes are reused.
    The stall guard is the default one here: 37 streams on a busy 2-core machine may wait more than
    this file's 1 s between two pieces, which is not what this test is about."""
    llm = OllamaLLM(RAGSettings(ollama_base_url=fake_ollama.url), calibration=Calibration())
    fake_ollama.reply("one two three four five")
    fake_ollama.token_delay(0.05)
    peak: list[list[int]] = []

    async def one() -> str:
        pieces = []
        async for piece in llm.stream(messages=QUESTION, model="llama3.2"):
            pieces.append(piece)
            peak.append(_lane_streams(llm))
        return "".join(pieces)

    burst = 2 * LANE_STREAMS + 5
    results = await asyncio.gather(*(one() for _ in range(burst)))
    assert results == ["one two three four five"] * burst
    assert max(len(p) for p in peak) == 3
    assert max(max(p) for p in peak) == LANE_STREAMS
    assert max(sum(p) for p in peak) == burst  # all at once: none waited for another to end
    assert _lane_streams(llm) == [0, 0, 0]
    fake_ollama.token_delay(0.0)
    assert "".join(await collect(llm)) == "one two three four five"
    assert len(_lane_streams(llm)) == 3  # no new lane for a later stream


async def test_a_stream_closed_early_frees_its_place_in_the_lane(fake_ollama: FakeOllama, llm: OllamaLLM) -> None:
    fake_ollama.reply("one two three")
    fake_ollama.token_delay(0.2)
    stream = llm.stream(messages=QUESTION, model="llama3.2")
    assert await stream.__anext__() == "one"
    assert _lane_streams(llm) == [1]
    await stream.aclose()
    assert _lane_streams(llm) == [0]


async def test_consumer_leaving_early_closes_the_connection(
    fake_ollama: FakeOllama,
    llm: OllamaLLM,
) -> None:
    """A client that goes away (closed tab) must not leave Ollama generating into the void."""
    fake_ollama.reply("one two three four five six")
    fake_ollama.token_delay(0.5)
    stream = llm.stream(messages=QUESTION, model="llama3.2")
    assert await stream.__anext__() == "one"
    await stream.aclose()
    await wait_for_disconnect(fake_ollama)


async def test_retries_never_outlast_rag_timeout(fake_ollama: FakeOllama) -> None:
    """The retry backoff (here 1.2 s, 2.4 s, ...) is cut at the RAG_TIMEOUT_SECONDS deadline (3 s:
    a 502 that a busy machine delays by a second must not read as the model's silence)."""
    timeout = 3.0
    settings = RAGSettings(
        ollama_base_url=fake_ollama.url,
        rag_timeout_seconds=timeout,
        rag_retry_initial_delay=1.2,
        rag_retry_max_delay=10,
    )
    fake_ollama.fail_with(status=502, times=None)
    started = time.monotonic()
    with pytest.raises(LLMResponseError):
        await collect(OllamaLLM(settings))
    assert time.monotonic() - started < timeout + 0.5
    assert len(fake_ollama.requests_to("/api/chat")) == 2  # 1.2 s fits, 1.2 + 2.4 s does not


async def test_health_requires_the_ollama_embedding_model_when_used(fake_ollama: FakeOllama) -> None:
    settings = RAGSettings(
        ollama_base_url=fake_ollama.url, embedding_backend="ollama", embedding_model="mxbai-embed-large"
    )
    health = await OllamaLLM(settings).health()
    assert health["reachable"] is True and health["ok"] is False
    assert health["missing"] == ["mxbai-embed-large"]
