"""Structured JSON logs carrying a request id.

One JSON object per line: timestamp (UTC ISO 8601), level, component (the logger name), request_id,
message, then any `extra={...}` fields. The request id lives in a contextvar so that every log line
of a request (including ones from tasks it spawns) carries it without passing it around.

Django settings use it through LOGGING: `"()": "ragchat.services.logs.JsonFormatter"`, or call
`logging_config(level)` / `configure_logging(level)`.
"""

from __future__ import annotations

import contextvars
import logging
import logging.config
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from pythonjsonlogger.json import JsonFormatter as _BaseJsonFormatter

FORMATTER_PATH = "ragchat.services.logs.JsonFormatter"

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("ragchat_request_id", default=None)


def new_request_id() -> str:
    return uuid.uuid4().hex[:16]


def get_request_id() -> str | None:
    return request_id_var.get()


@contextmanager
def bind_request_id(request_id: str | None = None) -> Iterator[str]:
    """`with bind_request_id() as rid:` logs inside carry `rid` (a new one unless given)."""
    rid = request_id or new_request_id()
    token = request_id_var.set(rid)
    try:
        yield rid
    finally:
        request_id_var.reset(token)


class RequestIdFilter(logging.Filter):
    """Copies the contextvar onto the record (for non-JSON formatters that want %(request_id)s)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", None):
            record.request_id = request_id_var.get()
        return True


class JsonFormatter(_BaseJsonFormatter):
    """python-json-logger's formatter with our fixed fields first."""

    def add_fields(
        self,
        log_data: dict[str, Any],
        record: logging.LogRecord,
        message_dict: dict[str, Any],
    ) -> None:
        log_data["timestamp"] = datetime.fromtimestamp(record.created, tz=UTC).isoformat()
        log_data["level"] = record.levelname
        log_data["component"] = record.name
        log_data["request_id"] = getattr(record, "request_id", None) or request_id_var.get()
        log_data["message"] = record.getMessage()
        super().add_fields(log_data, record, message_dict)
        # The base class re-adds "message" from the required fields; keep ours and drop noise.
        log_data.pop("levelname", None)
        log_data.pop("name", None)
        log_data.pop("asctime", None)


def logging_config(level: str = "INFO") -> dict[str, Any]:
    """A dictConfig dict: JSON to stderr for everything, ragchat at `level`."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": "ragchat.services.logs.RequestIdFilter"}},
        "formatters": {"json": {"()": FORMATTER_PATH}},
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "filters": ["request_id"],
            }
        },
        "root": {"handlers": ["console"], "level": "WARNING"},
        "loggers": {"ragchat": {"level": level, "propagate": True}},
    }


def configure_logging(level: str = "INFO") -> None:
    logging.config.dictConfig(logging_config(level))
