"""Structured JSON logs with a request id per HTTP request and per chat turn (seed 003)."""
from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator
from datetime import datetime, timezone

from pythonjsonlogger.json import JsonFormatter as _BaseJsonFormatter

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)


def current_request_id() -> str | None:
    return request_id_var.get()


@contextlib.contextmanager
def bind_request_id(request_id: str | None) -> Iterator[None]:
    token = request_id_var.set(request_id)
    try:
        yield
    finally:
        request_id_var.reset(token)


class JsonFormatter(_BaseJsonFormatter):
    """One JSON object per line: timestamp, level, component, request_id, message, extra fields."""

    def add_fields(self, log_record: dict, record: logging.LogRecord, message_dict: dict) -> None:
        super().add_fields(log_record, record, message_dict)
        log_record["timestamp"] = datetime.fromtimestamp(record.created, tz=timezone.utc).isoformat()
        log_record["level"] = record.levelname
        log_record["component"] = record.name
        log_record.setdefault("request_id", request_id_var.get())
        log_record.pop("levelname", None)
        log_record.pop("name", None)
