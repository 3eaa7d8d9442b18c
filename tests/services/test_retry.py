"""Retries with exponential backoff for transient errors only (docs/specs/rag-llm-service-architecture.md
§Retry Logic)."""

from __future__ import annotations

import socket
import time

import httpx
import ollama
import pytest

from ragchat.services.config import RAGSettings
from ragchat.services.retry import (
    RetryPolicy,
    is_transient_error,
    retry_async,
)

FAST = RetryPolicy(retries=3, initial_delay=0.001, max_delay=0.004)


def _status_error(code: int) -> httpx.HTTPStatusError:
    request = httpx.Request("POST", "http://ollama/api/chat")
    return httpx.HTTPStatusError("boom", request=request, response=httpx.Response(code, request=request))


class QdrantLikeError(Exception):
    """Like qdrant_client's UnexpectedResponse: carries `status_code`."""

    def __init__(self, status_code: int) -> None:
        super().__init__(f"status {status_code}")
        self.status_code = status_code


def test_policy_defaults_are_seed_003() -> None:
    policy = RetryPolicy.from_settings(RAGSettings())
    assert (policy.retries, policy.initial_delay, policy.multiplier, policy.max_delay) == (3, 1.0, 2.0, 10.0)
    assert [policy.delay(n) for n in range(5)] == [1.0, 2.0, 4.0, 8.0, 10.0]


@pytest.mark.parametrize(
    "error",
    [
        _status_error(500),
        _status_error(502),
        _status_error(503),
        _status_error(504),
        ollama.ResponseError("busy", 503),
        QdrantLikeError(502),
        httpx.ConnectError("refused"),
        httpx.ConnectTimeout("slow connect"),
        httpx.RemoteProtocolError("reset"),
        ConnectionResetError(),
        ConnectionError("ollama down"),
        socket.gaierror(-2, "Name or service not known"),
    ],
)
def test_transient_errors(error: BaseException) -> None:
    assert is_transient_error(error)


@pytest.mark.parametrize(
    "error",
    [
        _status_error(400),
        _status_error(401),
        _status_error(403),
        _status_error(404),
        ollama.ResponseError('model "x" not found', 404),
        QdrantLikeError(400),
        ollama.ResponseError("in-stream error"),  # status -1: the model failed mid-answer
        httpx.ReadTimeout("slow answer"),
        ValueError("validation"),
        KeyError("x"),
    ],
)
def test_permanent_errors(error: BaseException) -> None:
    assert not is_transient_error(error)


def _refused_like_clients_raise_it() -> BaseException:
    """httpx and the ollama client wrap the socket's ConnectionRefusedError two or three times."""
    try:
        try:
            try:
                raise ConnectionRefusedError(111, "Connection refused")
            except ConnectionRefusedError as e:
                raise httpx.ConnectError("All connection attempts failed") from e
        except httpx.ConnectError as e:
            raise ConnectionError("Failed to connect to Ollama") from e
    except ConnectionError as e:
        return e


def test_connection_refused_is_not_retried() -> None:
    """Nothing listening is not a transient fault: retrying it only delays the answer."""
    assert not is_transient_error(_refused_like_clients_raise_it())
    assert not is_transient_error(ConnectionRefusedError())


async def test_retry_async_retries_transient_then_succeeds() -> None:
    calls = []
    sleeps: list[float] = []

    async def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise _status_error(503)
        return "ok"

    async def record_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    policy = RetryPolicy(retries=3, initial_delay=1.0, max_delay=10.0)
    assert await retry_async(flaky, policy=policy, sleep=record_sleep) == "ok"
    assert len(calls) == 3
    assert sleeps == [1.0, 2.0]  # exponential, x2


async def test_retry_async_gives_up_after_retries() -> None:
    calls = []

    async def down() -> None:
        calls.append(1)
        raise httpx.ConnectError("refused")

    with pytest.raises(httpx.ConnectError):
        await retry_async(down, policy=FAST)
    assert len(calls) == 4  # first try + 3 retries


async def test_retry_async_never_retries_permanent_errors() -> None:
    calls = []

    async def missing() -> None:
        calls.append(1)
        raise ollama.ResponseError('model "x" not found', 404)

    with pytest.raises(ollama.ResponseError):
        await retry_async(missing, policy=FAST)
    assert len(calls) == 1


async def test_retry_async_respects_deadline() -> None:
    calls = []

    async def down() -> None:
        calls.append(1)
        raise _status_error(500)

    started = time.monotonic()
    policy = RetryPolicy(retries=5, initial_delay=0.2, max_delay=1.0)
    with pytest.raises(httpx.HTTPStatusError):
        await retry_async(down, policy=policy, deadline=time.monotonic() + 0.3)
    assert len(calls) == 2  # 0.2 s fits before the deadline, the next 0.4 s does not
    assert time.monotonic() - started < 0.35


async def test_retry_async_custom_predicate_and_loose_keywords() -> None:
    calls = []

    async def qdrant_busy() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise QdrantLikeError(409)
        return "done"

    result = await retry_async(
        qdrant_busy,
        attempts=2,
        initial_delay=0.001,
        max_delay=0.001,
        is_transient=lambda e: getattr(e, "status_code", None) == 409,
    )
    assert result == "done" and len(calls) == 2
