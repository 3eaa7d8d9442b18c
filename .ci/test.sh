#!/usr/bin/env bash
# Every test, the independent runs side by side:
#   - the suite on the embedded defaults (SQLite, in-memory channel layer),
#   - the suite again on the scale-out parts (PostgreSQL, Redis channel layer) when they are reachable,
#     but for the tests that run alike on both (tests/conftest.py, engine_independent),
#   - the tests that need torch (tests/export), in a temporary environment of their own.
# Each database pass spreads its test files over TEST_WORKERS pytest-xdist workers (default 2). Every
# run writes its log to test-artifacts/ and is printed when it ends. pytest's exit 5 ("no tests
# collected") fails the run like any other non-zero exit.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
WORKERS=${TEST_WORKERS:-2}
mkdir -p test-artifacts

echo "== ruff (lint and format)"
$BIN/ruff check . && $BIN/ruff format --check . || { echo "ruff found problems: run .venv/bin/ruff check --fix . && .venv/bin/ruff format ."; exit 1; }

# A module's tests stay on one worker (its module-scoped servers and browser start once);
# every worker has a data folder, a channel prefix and a PostgreSQL test database of its own
# (tests/settings.py, pytest-django).
PYTEST=($BIN/pytest -q -p no:cacheprovider -n "$WORKERS" --dist loadfile --durations=25)
names=()
pids=()
start() {  # start NAME COMMAND...: the run in the background, its output in test-artifacts/NAME.log
  local name=$1
  shift
  echo "== started: $name"
  "$@" >"test-artifacts/$name.log" 2>&1 &
  names+=("$name")
  pids+=($!)
}

start pytest-sqlite env -u DATABASE_URL -u REDIS_URL -u QDRANT_URL RAGCHAT_DATA_DIR=data/test-sqlite "${PYTEST[@]}" "$@"

PG_URL=${TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/ragchat}
REDIS=${TEST_REDIS_URL:-redis://127.0.0.1:6379/0}
if $BIN/python - "${PG_URL%/*}/postgres" <<'PY' 2>/dev/null
import sys, psycopg
psycopg.connect(sys.argv[1], connect_timeout=3).close()
PY
then
  # A database name of this run's own: pytest-django creates test_<name>_gw<N> per worker, and
  # another run on the same server cannot collide with it.
  pg_run=${PG_URL}_ci_$$
  # Connections are not kept between requests here, so none is left open on a test database
  # when pytest drops it.
  pg_env=(DB_CONN_MAX_AGE=0 DATABASE_URL=$pg_run RAGCHAT_DATA_DIR=data/test-postgres CHANNELS_PREFIX="ragchat-test-$$")
  redis_ok=$($BIN/python -c "import redis,sys; redis.Redis.from_url('$REDIS', socket_connect_timeout=2).ping(); print('yes')" 2>/dev/null || true)
  # The tests that run alike on both (the core's, and those on servers of their own) run once, in the SQLite pass
  # (the engine_independent marker, tests/conftest.py).
  if [ "$redis_ok" = "yes" ]; then
    start pytest-postgres-redis env -u QDRANT_URL "${pg_env[@]}" REDIS_URL=$REDIS "${PYTEST[@]}" -m "not engine_independent" "$@"
  else
    echo "(Redis not reachable: the PostgreSQL run uses the in-memory channel layer)"
    start pytest-postgres env -u QDRANT_URL -u REDIS_URL "${pg_env[@]}" "${PYTEST[@]}" -m "not engine_independent" "$@"
  fi
else
  echo "== PostgreSQL not reachable at $PG_URL: skipped the PostgreSQL run"
fi

# Only when the whole suite runs: a selection passed as arguments is for the database passes.
if [ $# -eq 0 ]; then
  start pytest-torch scripts/export_env.sh tests/export/requirements.txt python -m pytest -q -p no:cacheprovider -c tests/export/pytest.ini tests/export
fi

status=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"
  rc=$?
  echo "== ${names[$i]}: exit $rc"
  cat "test-artifacts/${names[$i]}.log"
  [ $rc -eq 5 ] && echo "${names[$i]}: pytest collected no tests: failing the run"
  [ $rc -ne 0 ] && [ $status -eq 0 ] && status=$rc
done
# A test database a worker left behind (a connection still open when pytest-django dropped it).
if [ -n "${pg_run:-}" ]; then
  $BIN/python - "${PG_URL%/*}/postgres" "test_${pg_run##*/}_" <<'PY' || true
import sys, psycopg
with psycopg.connect(sys.argv[1], autocommit=True) as db:
    for (name,) in db.execute("SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (sys.argv[2],)).fetchall():
        db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
PY
fi
exit $status
