"""The containers' health check (Dockerfile HEALTHCHECK, compose.yaml); exits 0 when healthy.

    python deploy/healthcheck.py [--port 8000]   the web server: GET /health answers 200
    python deploy/healthcheck.py --worker        an ingestion worker on this host beat recently

The web check asks the server the way its proxy does: the Host header is the first of
DJANGO_ALLOWED_HOSTS and X-Forwarded-Proto is https, so HTTPS redirection and host checks pass as
they do for real requests. /health is 503 when a required part is down (database, vector store,
embedder; also a store built with another embedding model, until `manage.py reindex`).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import urllib.error
import urllib.request
from pathlib import Path


def web(port: int) -> int:
    hosts = [h.strip() for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost").split(",") if h.strip()]
    host = next((h.lstrip(".") for h in hosts if h != "*"), "localhost")
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/health", headers={"Host": host, "X-Forwarded-Proto": "https"}
    )
    try:
        with urllib.request.urlopen(request, timeout=8) as response:
            status = response.status
    except urllib.error.HTTPError as e:
        status = e.code
    except OSError as e:
        print(f"unhealthy: {e}")
        return 1
    print(f"/health: {status}")
    return 0 if status == 200 else 1


def worker() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ragchat.settings")
    import django

    django.setup()
    from datetime import timedelta

    from django.conf import settings
    from django.utils import timezone

    from documents.models import IngestionWorker

    fresh = timezone.now() - timedelta(seconds=settings.RAGCHAT_WORKER_STALE_SECONDS)
    alive = IngestionWorker.objects.filter(hostname=socket.gethostname()[:255], heartbeat_at__gte=fresh).exists()
    print("worker heartbeat: " + ("fresh" if alive else "missing or stale"))
    return 0 if alive else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--worker", action="store_true")
    options = parser.parse_args()
    sys.exit(worker() if options.worker else web(options.port))
