"""Pytest fixtures around the project's fake Ollama server (ragchat/fake_ollama) and the tests' mail
servers (tests/fakes/mail.py).

Enabled by `pytest_plugins = ["tests.fakes.plugin"]`.

- `ollama_server`: one server for the whole session (real HTTP on a free 127.0.0.1 port).
- `fake_ollama`: the same server, reset to defaults before and after each test; script it here.
- `ollama_url`: its base URL (depends on `fake_ollama`, so the server is reset for the test).
- `smtp_server`: a real SMTP server (aiosmtpd) on a free 127.0.0.1 port for one test, no AUTH, no TLS.
- `hung_smtp_server`: a mail server that accepts connections and never answers, for one test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ragchat.fake_ollama import FakeOllama
from tests.fakes.mail import HungSmtpServer, SmtpServer


@pytest.fixture(scope="session")
def ollama_server() -> Iterator[FakeOllama]:
    server = FakeOllama().start()
    yield server
    server.stop()


@pytest.fixture
def fake_ollama(ollama_server: FakeOllama) -> Iterator[FakeOllama]:
    ollama_server.reset()
    yield ollama_server
    ollama_server.reset()


@pytest.fixture
def ollama_url(fake_ollama: FakeOllama) -> str:
    return fake_ollama.url


@pytest.fixture
def smtp_server() -> Iterator[SmtpServer]:
    server = SmtpServer().start()
    yield server
    server.stop()


@pytest.fixture
def hung_smtp_server() -> Iterator[HungSmtpServer]:
    server = HungSmtpServer().start()
    yield server
    server.stop()
