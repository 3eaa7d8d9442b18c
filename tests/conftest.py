"""Project-wide fixtures. The fake Ollama server's fixtures live in tests/fakes/plugin.py."""

import os
from dataclasses import replace

import pytest

# The ASGI module warms the embedding model up at import; tests set their own parts up.
os.environ.setdefault("RAGCHAT_WARMUP", "0")

pytest_plugins = ["tests.fakes.plugin"]

# The tests that need torch run in the export environment, not in the app's .venv (.ci/test.sh runs
# them there: tests/export/pytest.ini).
collect_ignore = ["export"]


# Tests that run alike on SQLite and on PostgreSQL + Redis, so once in .ci/test.sh: the Django-free
# core (ragchat/services, the fake model server), tested without the database or the channel layer;
# and the tests that start servers of their own (tests/browser/conftest.py LiveServer: its own
# SQLite file and in-memory layer, whatever the pass's settings) or name their engines themselves
# (the backup on both, the Redis and scale-out runs).
_ENGINE_INDEPENDENT = (
    "services/",
    "fake_ollama/",
    "browser/",
    "api/test_api_browser.py",
    "api/test_api_live.py",
    "api/test_api_schemathesis.py",
    "api/test_openai_provider_live.py",
    "ops/test_backup.py",
    "ops/test_backup_qdrant_server.py",
    "ops/test_backup_while_ingesting.py",
    "ops/test_disconnect.py",
    "ops/test_redis_idle.py",
    "ops/test_scale_out.py",
    "real_model/",
)
_DATABASE_FIXTURES = {"db", "transactional_db", "django_db_setup", "live_server", "django_user_model", "client"}


PROCESS_TESTS_TIMEOUT = 300


def pytest_collection_modifyitems(config, items):
    """Gives each schemathesis item (one per API operation) its own node id again. Since pytest 9.2
    a Function's id is built from `originalname` and its callspec, and schemathesis names its items
    `test[GET /path]` with `originalname="test"` and no callspec: every operation of a test got the
    same id, and pytest-xdist, which schedules by node id, ran only the first one of them.

    Marks `engine_independent` those of _ENGINE_INDEPENDENT that use no database fixture of the
    pass: the second database pass of .ci/test.sh (PostgreSQL + Redis) leaves them to the first,
    which runs them once.

    Gives the tests of whole processes (tests/ops: daphne started and killed, manage.py commands,
    workers, one after the other) PROCESS_TESTS_TIMEOUT unless they say otherwise: a Django process
    starts in about 3 s on a quiet box, and up to three times that while CI's two database passes
    share two cores, where the default 120 s timed out tests that were not hung."""
    tests_dir = config.rootpath / "tests"
    for item in items:
        if getattr(item, "operation_label", None) and not item.nodeid.endswith(item.name):
            item._id = item._id.with_params(item.name[len(item.originalname) + 1 : -1])
        if not item.path.is_relative_to(tests_dir):
            continue
        where = item.path.relative_to(tests_dir).as_posix()
        if where.startswith(_ENGINE_INDEPENDENT) and not _DATABASE_FIXTURES & set(item.fixturenames):
            item.add_marker("engine_independent")
        if where.startswith("ops/") and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(PROCESS_TESTS_TIMEOUT))


@pytest.fixture(autouse=True)
def _emails_sent():
    """Emails a test queued to the mail thread (ragchat.mail) are sent before the next test starts,
    into this test's outbox and with its settings."""
    yield
    from ragchat.mail import wait_sent

    assert wait_sent(30), "an email was still being sent 30 s after the test"


@pytest.fixture
def rag_runtime(settings, tmp_path, ollama_url):
    """Point the process's RAG parts at a fresh embedded Qdrant in tmp_path, the fake Ollama server
    and the fast hashing embedder; reset them before and after the test."""
    from ragchat import runtime

    settings.RAG = replace(
        settings.RAG,
        qdrant_path=str(tmp_path / "qdrant"),
        ollama_base_url=ollama_url,
        embedding_backend="hashing",
        embedding_model="hashing-384",
        rag_timeout_seconds=2,
        rag_retry_initial_delay=0.01,
        rag_retry_max_delay=0.05,
    )
    settings.MEDIA_ROOT = tmp_path / "media"
    runtime.reset()
    yield settings.RAG
    runtime.reset()
