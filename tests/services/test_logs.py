"""Structured JSON logs carrying the request id."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator

import pytest

from ragchat.services.logs import (
    FORMATTER_PATH,
    JsonFormatter,
    RequestIdFilter,
    bind_request_id,
    get_request_id,
    logging_config,
)


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("ragchat.test_logs")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield stream
    logger.removeHandler(handler)


def records(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_line_has_fixed_fields_and_extras(log_lines: io.StringIO) -> None:
    logger = logging.getLogger("ragchat.test_logs")
    with bind_request_id("req-123") as rid:
        assert rid == "req-123" and get_request_id() == "req-123"
        logger.info("stage done %s", "embed", extra={"stage": "embed", "ms": 12.5})
    logger.warning("outside")
    inside, outside = records(log_lines)
    assert inside["message"] == "stage done embed"
    assert inside["level"] == "INFO" and inside["component"] == "ragchat.test_logs"
    assert inside["request_id"] == "req-123"
    assert inside["stage"] == "embed" and inside["ms"] == 12.5
    assert inside["timestamp"].endswith("+00:00")
    assert outside["request_id"] is None and get_request_id() is None


async def test_request_id_is_per_task(log_lines: io.StringIO) -> None:
    logger = logging.getLogger("ragchat.test_logs")

    async def work(rid: str) -> None:
        with bind_request_id(rid):
            await asyncio.sleep(0.01)
            logger.info("done")

    await asyncio.gather(work("a"), work("b"))
    assert sorted(r["request_id"] for r in records(log_lines)) == ["a", "b"]


def test_new_request_id_when_none_given() -> None:
    with bind_request_id() as rid:
        assert rid and get_request_id() == rid


def test_dict_config_names_the_formatter() -> None:
    config = logging_config("DEBUG")
    assert config["formatters"]["json"]["()"] == FORMATTER_PATH == "ragchat.services.logs.JsonFormatter"
    assert config["loggers"]["ragchat"]["level"] == "DEBUG"
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
    with bind_request_id("r1"):
        RequestIdFilter().filter(record)
    assert record.request_id == "r1"
