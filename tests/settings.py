"""Settings for the test suite: the production defaults (DEBUG off), plus a throwaway secret and
plain-HTTP transport, since the test client and the live test servers speak HTTP on loopback.
Subprocesses the tests start inherit these variables."""

import os

os.environ.setdefault("DJANGO_SECRET_KEY", "tests-only-not-a-secret-" + "x" * 40)
os.environ.setdefault("DJANGO_SECURE_SSL_REDIRECT", "false")
os.environ.setdefault("DJANGO_SECURE_COOKIES", "false")
os.environ.setdefault("DJANGO_SECURE_HSTS_SECONDS", "0")

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
