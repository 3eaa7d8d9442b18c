#!/usr/bin/env bash
# Runs a command in a throwaway virtualenv that holds torch: the ONNX export of the local embedding
# model (`make install`) and the tests that compare with torch (.ci/test.sh), so that the app's
# .venv never holds it. The environment lives in a temporary folder, removed when the command ends.
#   scripts/export_env.sh REQUIREMENTS-FILE COMMAND [ARG...]
# `python` in COMMAND is the environment's. PYTHON picks the interpreter (default python3.11).
set -euo pipefail
cd "$(dirname "$0")/.."
requirements=$1
shift
dir=$(mktemp -d "${TMPDIR:-/tmp}/ragchat-export-env.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"${PYTHON:-python3.11}" -m venv "$dir"
"$dir/bin/python" -m pip install -q -r "$requirements"
PATH="$dir/bin:$PATH" VIRTUAL_ENV="$dir" "$@"
