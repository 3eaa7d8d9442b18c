"""Settings for the test suite: the production defaults (DEBUG off), plus a throwaway secret and
plain-HTTP transport, since the test client and the live test servers speak HTTP on loopback.
Subprocesses the tests start inherit these variables."""

import os

os.environ.setdefault("DJANGO_SECRET_KEY", "tests-only-not-a-secret-" + "x" * 40)
os.environ.setdefault("DJANGO_SECURE_SSL_REDIRECT", "false")
os.environ.setdefault("DJANGO_SECURE_COOKIES", "false")
os.environ.setdefault("DJANGO_SECURE_HSTS_SECONDS", "0")

# Test processes side by side (.ci/test.sh: pytest-xdist workers, two database passes at once):
# each worker has a data folder (its embedded store, media) and a Redis channel prefix of its own.
# pytest-django gives each worker its own test database.
# (A subprocess that inherits them, with these settings, keeps them as they are.)
if _worker := os.environ.get("PYTEST_XDIST_WORKER"):
    if not os.environ.get("RAGCHAT_DATA_DIR", "").endswith(f"/{_worker}"):
        os.environ["RAGCHAT_DATA_DIR"] = f"{os.environ.get('RAGCHAT_DATA_DIR', 'data')}/{_worker}"
    if not os.environ.get("CHANNELS_PREFIX", "").endswith(f"-{_worker}"):
        os.environ["CHANNELS_PREFIX"] = f"{os.environ.get('CHANNELS_PREFIX', 'ragchat')}-{_worker}"

from ragchat.settings import *  # noqa: E402,F403

# Password hashing at full strength costs ~0.3 s per account: the tests create hundreds.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# The PostgreSQL + Redis run (REDIS_URL set) is one process on the embedded store: its holder
# (ragchat/processes.py refuses several processes on it otherwise). Not an environment variable:
# the servers the tests start choose their own role.
# It serves no handed-over turns: each test's event loop ends with the test, and a receive left
# waiting on Redis keeps a loop from closing (tests/ops/test_scale_out.py starts real holders).
if REDIS_URL:  # noqa: F405
    RAGCHAT_STORE_ROLE = "holder"
    RAGCHAT_SERVE_HANDED_TURNS = False
