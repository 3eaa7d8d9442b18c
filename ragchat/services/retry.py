"""Retries with exponential backoff for transient errors only (docs/specs/rag-llm-service-architecture.md
§Retry Logic).

Retryable: HTTP 500/502/503/504, connection errors and connect timeouts, resets, DNS errors.
Never retried: 400/401/403/404, validation errors, model not found, read timeouts (the caller's
time budget is what a timeout protects; retrying it would multiply the wait).

Generic: the predicate decides what is transient, so the vector store can pass its own for Qdrant.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import httpx

from .config import RAGSettings

log = logging.getLogger("ragchat.retry")

T = TypeVar("T")

TRANSIENT_STATUS_CODES = frozenset({500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """`retries` extra attempts after the first; delay = initial * multiplier**n, capped."""

    retries: int = 3
    initial_delay: float = 1.0
    multiplier: float = 2.0
    max_delay: float = 10.0

    @classmethod
    def from_settings(cls, settings: RAGSettings) -> RetryPolicy:
        return cls(
            retries=settings.rag_retry_attempts,
            initial_delay=settings.rag_retry_initial_delay,
            max_delay=settings.rag_retry_max_delay,
        )

    def delay(self, retry_number: int) -> float:
        """Delay before retry `retry_number` (0-based)."""
        return min(self.initial_delay * self.multiplier**retry_number, self.max_delay)


def status_code_of(exc: BaseException) -> int | None:
    """The HTTP status an exception carries: httpx, ollama.ResponseError, qdrant UnexpectedResponse."""
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code
    code = getattr(exc, "status_code", None)
    return code if isinstance(code, int) else None


def _refused(exc: BaseException) -> bool:
    """True when the error chain (clients wrap it two or three times) holds a refused connection."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ConnectionRefusedError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def is_transient_error(exc: BaseException) -> bool:
    """The retryable list of §Retry Logic (see the module docstring). Anything unknown is not retried."""
    code = status_code_of(exc)
    if code is not None:
        return code in TRANSIENT_STATUS_CODES
    if _refused(exc):
        # Nothing listens there: the retry policy retries connection *timeouts* and DNS errors, and a
        # refusal does not heal in seconds. Failing fast lets the chat show the passages at once.
        return False
    if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
        return True
    if isinstance(exc, httpx.TimeoutException):
        return False  # read/write timeouts: the time budget is spent, do not multiply it
    if isinstance(exc, httpx.ConnectError | httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return True
    if isinstance(exc, socket.gaierror):  # DNS
        return True
    # builtin ConnectionError covers refused/reset/aborted and the ollama client's wrapper.
    return isinstance(exc, ConnectionError)


def _policy(
    policy: RetryPolicy | None,
    attempts: int | None,
    initial_delay: float | None,
    max_delay: float | None,
) -> RetryPolicy:
    """An explicit policy, or one built from loose keywords (defaults: §Retry Logic of
    docs/specs/rag-llm-service-architecture.md)."""
    if policy is not None:
        return policy
    base = RetryPolicy()
    return RetryPolicy(
        retries=base.retries if attempts is None else attempts,
        initial_delay=base.initial_delay if initial_delay is None else initial_delay,
        max_delay=base.max_delay if max_delay is None else max_delay,
    )


async def retry_async(
    fn: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy | None = None,
    attempts: int | None = None,
    initial_delay: float | None = None,
    max_delay: float | None = None,
    is_transient: Callable[[BaseException], bool] = is_transient_error,
    deadline: float | None = None,
    what: str = "call",
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Await `fn()`; on a transient error wait and try again, up to `policy.retries` times.

    `deadline` (time.monotonic() value): never sleep past it; the last error is raised instead.
    Either pass `policy`, or `attempts` (retries after the first try) / `initial_delay` / `max_delay`.
    """
    policy = _policy(policy, attempts, initial_delay, max_delay)
    retry = 0
    while True:
        try:
            return await fn()
        except Exception as exc:  # noqa: BLE001 - the predicate decides
            delay = _next_delay(exc, retry, policy, is_transient, deadline)
            if delay is None:
                raise
            log.warning(
                "retrying %s after transient error",
                what,
                extra={"retry": retry + 1, "delay_s": delay, "error": repr(exc)},
            )
            await sleep(delay)
            retry += 1


def _next_delay(
    exc: BaseException,
    retry: int,
    policy: RetryPolicy,
    is_transient: Callable[[BaseException], bool],
    deadline: float | None,
) -> float | None:
    if retry >= policy.retries or not is_transient(exc):
        return None
    delay = policy.delay(retry)
    if deadline is not None and time.monotonic() + delay >= deadline:
        return None
    return delay
