"""Fixtures for the fault, scale-out and security tests: the chat and documents fixtures, reused;
a scratch PostgreSQL database; the slow-ingestion server of the kill-mid-ingestion tests."""

from __future__ import annotations

import os
import socket
from contextlib import ExitStack
from pathlib import Path

import pytest

from ragchat.bench.common import PostgresUnreachable, postgres_url, scratch_database
from ragchat.fake_ollama import FakeOllama
from tests.browser.conftest import LiveServer
from tests.chat.conftest import chat_session, corpus, drain_turns, user  # noqa: F401
from tests.documents.conftest import people, tags, upload, vectors  # noqa: F401

PG_URL = os.environ.get("TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/ragchat")
PG_ADMIN_URL = postgres_url(PG_URL, "postgres")  # where the scratch databases are created and dropped from

# Embeddings through the fake Ollama, 4 small chunks a call: a long document is indexed in many
# batches, so that a process killed mid-ingestion dies between two of them.
SLOW_INGESTION_ENV = {
    "EMBEDDING_BACKEND": "ollama",
    "EMBEDDING_MODEL": "nomic-embed-text",
    "EMBEDDING_BATCH_SIZE": "4",
    "CHUNK_SIZE_TOKENS": "64",
    "CHUNK_OVERLAP_TOKENS": "8",
    "RAG_RETRY_ATTEMPTS": "0",
}


def dead_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def scratch_postgres():
    """`scratch_postgres(prefix)`: the URL of a new database on TEST_POSTGRES_URL's server
    (ragchat.bench.common.scratch_database), dropped when the test ends; the test is skipped when
    that server is not reachable."""
    with ExitStack() as made:

        def make(prefix: str) -> str:
            pytest.importorskip("psycopg")
            try:
                return made.enter_context(scratch_database(PG_ADMIN_URL, prefix))
            except PostgresUnreachable as e:
                pytest.skip(f"PostgreSQL not reachable at {PG_URL}: {e}")

        yield make


@pytest.fixture
def slow_embeddings():
    fake = FakeOllama().start()
    fake.first_token_delay(0.2)  # every /api/embed call (one per batch of 4 chunks) takes 0.2 s
    yield fake
    fake.stop()


def slow_ingestion_server(data_dir: Path, slow_embeddings: FakeOllama, extra_env: dict[str, str]) -> LiveServer:
    """A server (not started) that ingests through `slow_embeddings` in SLOW_INGESTION_ENV's small
    batches, `extra_env` on top."""
    return LiveServer(data_dir=data_dir, ollama_url=slow_embeddings.url, extra_env={**SLOW_INGESTION_ENV, **extra_env})
