"""Fixtures for the fault, scale-out and security tests: the chat and documents fixtures, reused."""

from __future__ import annotations

import socket

from tests.chat.conftest import chat_session, corpus, drain_turns, user  # noqa: F401
from tests.documents.conftest import people, tags, upload, vectors  # noqa: F401


def dead_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
