"""Pytest fixtures around the project's fake Ollama server (ragchat/fake_ollama).

Enabled by `pytest_plugins = ["tests.fakes.plugin"]`.

- `ollama_server`: one server for the whole session (real HTTP on a free 127.0.0.1 port).
- `fake_ollama`: the same server, reset to defaults before and after each test; script it here.
- `ollama_url`: its base URL (depends on `fake_ollama`, so the server is reset for the test).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ragchat.fake_ollama import FakeOllama


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
