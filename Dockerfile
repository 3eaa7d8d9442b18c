# ragchat: the web server (daphne) and, with another command, the ingestion worker.
# Build: docker build -t ragchat:0.1.0 .   Run: docker compose up -d (compose.yaml; docs/deploying.md).

ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

# ---- export: the local embedding model exported to ONNX once, offline, in a stage of its own: torch
# and the weights it reads stay here, only the exported folder goes on (ragchat/services/onnx_export.py).
FROM ${PYTHON_IMAGE} AS export
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PATH=/opt/export/bin:$PATH
RUN python -m venv /opt/export
WORKDIR /src
COPY deploy/export-requirements.txt deploy/
RUN pip install -r deploy/export-requirements.txt
COPY ragchat/__init__.py ragchat/
COPY ragchat/services ragchat/services
RUN python -m ragchat.services.onnx_export /opt/ragchat/onnx

# ---- build: the app's virtualenv (what the app runs: no torch)
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PATH=/opt/venv/bin:$PATH
RUN python -m venv /opt/venv
WORKDIR /src
# Dependencies first: a code change does not reinstall them.
COPY pyproject.toml ./
RUN pip install .
COPY . .

# ---- runtime: slim, the Debian packages the app calls, a non-root user
FROM ${PYTHON_IMAGE}
# tesseract: OCR of scanned PDFs; pango/harfbuzz + fonts: weasyprint's chat export to PDF;
# postgresql-client 15 (bookworm's): pg_dump/pg_restore for `manage.py backup` / `restore`.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
       tesseract-ocr tesseract-ocr-eng libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0 fonts-dejavu-core \
       postgresql-client \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 ragchat \
    && useradd --system --uid 10001 --gid ragchat --home-dir /data --shell /usr/sbin/nologin ragchat \
    && mkdir -p /data /media \
    && chown ragchat:ragchat /data /media
COPY --from=build /opt/venv /opt/venv
COPY --from=export /opt/ragchat/onnx /opt/ragchat/onnx
# The code stays root's: the app user can read it, not change it.
COPY --from=build /src /app
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/data \
    RAGCHAT_DATA_DIR=/data \
    MEDIA_ROOT=/media \
    EMBEDDING_ONNX_DIR=/opt/ragchat/onnx
WORKDIR /app
USER 10001:10001
EXPOSE 8000
VOLUME ["/data", "/media"]
# /health: 200 when the database, the vector store and the embedder are up (deploy/healthcheck.py).
# The worker overrides it with `deploy/healthcheck.py --worker` (its heartbeat), see compose.yaml.
HEALTHCHECK --interval=30s --timeout=10s --start-period=90s --retries=3 \
    CMD ["python", "deploy/healthcheck.py"]
CMD ["daphne", "-b", "0.0.0.0", "-p", "8000", "--proxy-headers", "ragchat.asgi:application"]
