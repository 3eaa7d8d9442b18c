"""A stand-in for a Qdrant server: Qdrant's REST API on a local port, answered by qdrant-client's
local mode (its Python engine; in memory, or in a folder that outlives a restart of the stand-in).

No Qdrant server binary can be installed here: PyPI has the clients and the embedded engine library
(qdrant-edge-py) but no server, Debian has no qdrant package, npm's packages are clients (and a
Testcontainers module that pulls a Docker image), and neither Docker Hub nor crates.io is reachable
to fetch the image or build the server. What this stand-in makes real is everything on our side of
the network: the app's processes reach it through QDRANT_URL with qdrant-client's REST transport,
every request and answer goes through qdrant-client's own OpenAPI models both ways (a field the
server would reject, or an answer shaped otherwise, fails here too), and several processes share
one store, as with a server. What it cannot show is the server's own engine: its HNSW graph,
quantization and optimizer are not there (local mode searches exactly), nor its clustering.

Only the routes the app uses (ragchat/services/vector_store/server.py, the backup's export and
import) are served; any other route answers 404, so a new call shows up as a failure.
"""

from __future__ import annotations

import json
import re
import threading
import time
import warnings
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pydantic import BaseModel, TypeAdapter

Handler = Callable[[Any, str, dict[str, list[str]], Any], Any]


def _dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, (list, tuple)):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


def _parse(model: Any, body: Any) -> Any:
    return TypeAdapter(model).validate_python(body)


def _routes() -> list[tuple[str, re.Pattern[str], Handler]]:
    from qdrant_client import models as m

    def exists(client, name, query, body):
        return {"exists": client.collection_exists(name)}

    def create(client, name, query, body):
        spec = _parse(m.CreateCollection, body)
        return client.create_collection(
            name,
            vectors_config=spec.vectors,
            sparse_vectors_config=spec.sparse_vectors,
            hnsw_config=spec.hnsw_config,
            optimizers_config=spec.optimizers_config,
            quantization_config=spec.quantization_config,
            metadata=spec.metadata,
        )

    def index(client, name, query, body):
        spec = _parse(m.CreateFieldIndex, body)
        return client.create_payload_index(name, spec.field_name, spec.field_schema)

    def upsert(client, name, query, body):
        spec = _parse(m.PointInsertOperations, body)
        points = spec.points if isinstance(spec, m.PointsList) else spec.batch
        return client.upsert(name, points=points, wait=True)

    def delete(client, name, query, body):
        return client.delete(name, points_selector=_parse(m.PointsSelector, body), wait=True)

    def set_payload(client, name, query, body):
        spec = _parse(m.SetPayload, body)
        selector = m.FilterSelector(filter=spec.filter) if spec.filter is not None else spec.points
        return client.set_payload(name, payload=spec.payload, points=selector, key=spec.key, wait=True)

    def count(client, name, query, body):
        spec = _parse(m.CountRequest, body)
        return client.count(name, count_filter=spec.filter, exact=spec.exact if spec.exact is not None else True)

    def facet(client, name, query, body):
        spec = _parse(m.FacetRequest, body)
        return client.facet(
            name, key=spec.key, facet_filter=spec.filter, limit=spec.limit or 10, exact=bool(spec.exact)
        )

    def query_batch(client, name, query, body):
        return client.query_batch_points(name, requests=_parse(m.QueryRequestBatch, body).searches)

    def retrieve(client, name, query, body):
        spec = _parse(m.PointRequest, body)
        return client.retrieve(
            name,
            ids=spec.ids,
            with_payload=spec.with_payload if spec.with_payload is not None else True,
            with_vectors=spec.with_vector if spec.with_vector is not None else False,
        )

    def scroll(client, name, query, body):
        spec = _parse(m.ScrollRequest, body)
        points, offset = client.scroll(
            name,
            scroll_filter=spec.filter,
            limit=spec.limit or 10,
            offset=spec.offset,
            with_payload=spec.with_payload if spec.with_payload is not None else True,
            with_vectors=spec.with_vector if spec.with_vector is not None else False,
            order_by=spec.order_by,
        )
        return {"points": points, "next_page_offset": offset}

    collection = r"/collections/(?P<name>[^/]+)"
    table: list[tuple[str, str, Handler]] = [
        ("GET", collection + "/exists", exists),
        ("GET", collection, lambda client, name, query, body: client.get_collection(name)),
        ("PUT", collection, create),
        ("DELETE", collection, lambda client, name, query, body: client.delete_collection(name)),
        ("PUT", collection + "/index", index),
        ("PUT", collection + "/points", upsert),
        ("POST", collection + "/points/delete", delete),
        ("POST", collection + "/points/payload", set_payload),
        ("POST", collection + "/points/count", count),
        ("POST", collection + "/facet", facet),
        ("POST", collection + "/points/query/batch", query_batch),
        ("POST", collection + "/points", retrieve),
        ("POST", collection + "/points/scroll", scroll),
    ]
    return [(method, re.compile(path + "$"), handler) for method, path, handler in table]


class QdrantStandIn:
    """`QdrantStandIn(path).start()`: serving on `url` until stop(); `requests` counts the calls
    answered by route (method and path pattern), so a test can see which ones the app made."""

    def __init__(self, path: Path | None = None, *, port: int = 0) -> None:
        self.path = Path(path) if path is not None else None
        self.port = port
        self.requests: dict[str, int] = {}
        self._lock = threading.Lock()  # local mode is one thread at a time
        self._client: Any = None
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> QdrantStandIn:
        from qdrant_client import QdrantClient

        self._client = QdrantClient(location=":memory:") if self.path is None else QdrantClient(path=str(self.path))
        routes = _routes()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _answer(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self) -> None:
                started = time.perf_counter()
                split = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if split.path == "/" and self.command == "GET":
                    self._answer(200, {"title": "qdrant - vector search engine", "version": version("qdrant-client")})
                    return
                for method, pattern, handler in routes:
                    match = pattern.match(split.path)
                    if method != self.command or match is None:
                        continue
                    key = f"{method} {pattern.pattern}"
                    try:
                        body = json.loads(raw) if raw else None
                        with stand_in._lock, warnings.catch_warnings():
                            # Local mode says that it ignores payload indexes and search parameters.
                            warnings.filterwarnings("ignore", message=".*(no effect|brute-force)", category=UserWarning)
                            stand_in.requests[key] = stand_in.requests.get(key, 0) + 1
                            result = handler(stand_in._client, match["name"], parse_qs(split.query), body)
                    except ValueError as e:  # local mode's "Collection ... not found", pydantic's errors
                        status = 404 if "not found" in str(e).lower() else 400
                        self._answer(status, {"status": {"error": str(e)}, "time": time.perf_counter() - started})
                        return
                    self._answer(200, {"result": _dump(result), "status": "ok", "time": time.perf_counter() - started})
                    return
                self._answer(404, {"status": {"error": f"not served by the stand-in: {self.command} {split.path}"}})

            do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="qdrant-stand-in", daemon=True)
        self._thread.start()
        return self

    def collections(self) -> list[str]:
        """The names of the collections the store holds."""
        with self._lock:
            return sorted(c.name for c in self._client.get_collections().collections)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._client is not None:
            with self._lock:
                self._client.close()
            self._client = None
