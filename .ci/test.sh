#!/usr/bin/env bash
# Every test, twice: on the embedded defaults (SQLite, in-memory channel layer), then on the
# scale-out parts (PostgreSQL, Redis channel layer) when they are reachable. pytest's exit 5
# ("no tests collected") fails the run like any other non-zero exit.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
mkdir -p test-artifacts

echo "== ruff (lint and format)"
$BIN/ruff check . && $BIN/ruff format --check . || { echo "ruff found problems: run .venv/bin/ruff check --fix . && .venv/bin/ruff format ."; exit 1; }

echo "== pytest on SQLite + in-memory channel layer"
env -u DATABASE_URL -u REDIS_URL -u QDRANT_URL $BIN/pytest -q -p no:cacheprovider "$@"
rc=$?
if [ $rc -ne 0 ]; then
  [ $rc -eq 5 ] && echo "pytest collected no tests: failing the run"
  exit $rc
fi

PG_URL=${TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/ragchat}
REDIS=${TEST_REDIS_URL:-redis://127.0.0.1:6379/0}
if $BIN/python - "$PG_URL" <<'PY' 2>/dev/null
import sys, psycopg
psycopg.connect(sys.argv[1].replace("/ragchat", "/postgres"), connect_timeout=3).close()
PY
then
  echo "== pytest on PostgreSQL + Redis channel layer"
  # Connections are not kept between requests here, so none is left open on the test database
  # when pytest drops it.
  redis_ok=$($BIN/python -c "import redis,sys; redis.Redis.from_url('$REDIS', socket_connect_timeout=2).ping(); print('yes')" 2>/dev/null || true)
  if [ "$redis_ok" = "yes" ]; then
    DB_CONN_MAX_AGE=0 DATABASE_URL=$PG_URL REDIS_URL=$REDIS CHANNELS_PREFIX="ragchat-test-$$" $BIN/pytest -q -p no:cacheprovider "$@"
  else
    echo "(Redis not reachable: PostgreSQL run uses the in-memory channel layer)"
    DB_CONN_MAX_AGE=0 DATABASE_URL=$PG_URL $BIN/pytest -q -p no:cacheprovider "$@"
  fi
  rc=$?
  [ $rc -eq 5 ] && echo "pytest collected no tests: failing the run"
  exit $rc
else
  echo "== PostgreSQL not reachable at $PG_URL: skipped the PostgreSQL run"
fi
