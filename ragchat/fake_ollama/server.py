"""An Ollama-protocol server that also speaks the OpenAI-compatible chat API: real HTTP on a free
127.0.0.1 port, run in a background thread.

The project ships it because no Ollama server can be installed on the development and CI
machines: the tests, `manage.py evaluate` (citation validity) and `manage.py bench` (websocket
streams) all talk to it through the real, unmodified langchain-ollama client.

It speaks the shapes the `ollama` client (and so langchain-ollama) sends and parses:
`/api/chat` and `/api/generate` (NDJSON stream over HTTP/1.1 chunked encoding, or one JSON object
when `"stream": false`), `/api/embed` (and the legacy `/api/embeddings`), `/api/tags`, `/api/show`,
`/api/ps`, `/api/version`, `GET /`; and, like Ollama itself and the servers LLM_PROVIDER=openai
talks to (vLLM, llama.cpp's server, ...), `GET /v1/models` and `POST /v1/chat/completions` (server-sent
events when `"stream": true`, with a last usage chunk when `stream_options.include_usage` asks for
one; errors as `{"error": {"message": ...}}`). Both protocols share one script: the same replies,
models, delays, stalls, failures and in-stream errors.

Replies are scripted through public methods on `FakeOllama` (reply, reply_citing, rating, delays,
stalls, failures, refused connections, the model list, how answers are cut into streamed pieces,
a callback when a stream ends); every request is recorded in `fake.requests`. `reset()` puts
everything back to the defaults and wakes any stalled handler.

Embeddings are deterministic and meaningful: a signed feature-hashed bag of lowercased words and
bigrams, L2-normalised, so texts that share words have a higher cosine similarity.

References: "spec v3": docs/specs/rag-service-spec-v3-FINAL.md.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_MODELS = ("llama3.2:latest", "qwen3:8b", "nomic-embed-text:latest")
DEFAULT_REPLY = "This is the fake model's answer."
DEFAULT_RATING: int | str = 80
CONFIDENCE_MARKER = "Rate the support level"
SOURCE_ID_RE = re.compile(r"\[SourceId:\s*([a-f0-9-]{36}:\d+)\]")
# A context chunk's header line (spec v3 chunk format), as opposed to the example id that the
# system prompt's rule 4 mentions inline.
SOURCE_HEADER_RE = re.compile(r"^\[SourceId:\s*([a-f0-9-]{36}:\d+)\]\s*$", re.MULTILINE)
_PIECE_RE = re.compile(r"\s+|\S+")
_TOKEN_RE = re.compile(r"\w{1,4}|[^\w\s]")
_WORD_RE = re.compile(r"\w+")
_DOC_PREFIX_RE = re.compile(r"^\s*(search_query|search_document|classification|clustering):\s*")
_REASONING_FAMILIES = ("qwen3", "deepseek-r1")

# What /api/show reports per model family: architecture, context length, capabilities, family.
_MODEL_INFO: dict[str, tuple[str, int, list[str]]] = {
    "llama3.2": ("llama", 131072, ["completion", "tools"]),
    "qwen3": ("qwen3", 40960, ["completion", "tools", "thinking"]),
    "deepseek-r1": ("qwen2", 131072, ["completion", "thinking"]),
    "nomic-embed-text": ("nomic-bert", 2048, ["embedding"]),
    "all-minilm": ("bert", 512, ["embedding"]),
    "mxbai-embed-large": ("bert", 512, ["embedding"]),
}


class _Aborted(Exception):
    """The handler was woken by reset() or the client went away: drop the connection."""


def canonical_model_name(name: str) -> str:
    """Ollama's rule: a name without a tag means the `latest` tag."""
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


def fake_token_count(text: str) -> int:
    """The fake tokenizer: words split into pieces of up to 4 characters, each punctuation mark one
    token (about 3.5-4 characters per token on English prose, like real BPE vocabularies)."""
    return len(_TOKEN_RE.findall(text))


def split_pieces(text: str) -> list[str]:
    """What the fake streams: words and the whitespace between them, one piece per chunk."""
    return _PIECE_RE.findall(text)


def hashed_embedding(text: str, dimension: int) -> list[float]:
    """Signed feature hashing of lowercased words (weight 1) and bigrams (weight 0.5), L2-normalised.

    The nomic task prefixes are stripped first: they would add the same feature to every query
    (or document) and carry no meaning here.
    """
    text = _DOC_PREFIX_RE.sub("", text)
    words = [w.lower() for w in _WORD_RE.findall(text)]
    vector = [0.0] * dimension
    features = [(w, 1.0) for w in words] + [(f"{a} {b}", 0.5) for a, b in zip(words, words[1:], strict=False)]
    for feature, weight in features:
        digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        index = value % dimension
        sign = 1.0 if (value >> 63) & 1 else -1.0
        vector[index] += sign * weight
    norm = math.sqrt(sum(v * v for v in vector))
    if norm == 0.0:
        # An empty text still gets a valid unit vector (real models never return zeros).
        vector[0] = 1.0
        return vector
    return [v / norm for v in vector]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    body: Any  # parsed JSON, or None

    @property
    def model(self) -> str | None:
        if isinstance(self.body, dict):
            return self.body.get("model") or self.body.get("name")
        return None

    @property
    def options(self) -> dict[str, Any]:
        if isinstance(self.body, dict):
            return self.body.get("options") or {}
        return {}


@dataclass
class _Script:
    """Everything a test can change; reset() replaces it with a fresh one."""

    replies: deque[Any] = field(default_factory=deque)  # str or callable(messages) -> str
    default_reply: Any = DEFAULT_REPLY
    ratings: deque[int | str] = field(default_factory=deque)
    default_rating: int | str = DEFAULT_RATING
    first_token_delay: float = 0.0
    token_delay: float = 0.0
    stall_after_tokens: int | None = None
    stall_seconds: float = 0.0
    error_after_tokens: int | None = None
    cut_after_tokens: int | None = None
    error_message: str = "an error was encountered while running the model"
    fail_status: int | None = None
    fail_times: int | None = None  # None = every request
    fail_paths: tuple[str, ...] = ()
    fail_message: str = "Internal Server Error"
    api_key: str | None = None  # the bearer token /v1/ requests must carry (None: any or none)
    models: list[str] = field(default_factory=lambda: list(DEFAULT_MODELS))
    embedding_dimensions: dict[str, int] = field(default_factory=dict)
    default_embedding_dimension: int = 768
    pieces: Callable[[str], list[str]] = split_pieces
    on_stream_end: Callable[[], None] | None = None
    citation_habit: str | None = None
    thinks_aloud: str | None = None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False
    # The listen queue Ollama (Go) gets: the kernel's whole somaxconn. With 128, a burst of 200
    # streams lost the SYNs beyond it, and the kernel's retry a second later looked like a slow model.
    request_queue_size = 4096

    def __init__(self, address: tuple[str, int], fake: FakeOllama) -> None:
        self.fake = fake
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request, client_address):  # type: ignore[override]
        # Go's net/http (real Ollama) disables Nagle; without this, small NDJSON lines wait ~40 ms
        # for the client's delayed ACK.
        request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._connections_lock:
            self._connections.add(request)
        with self.fake._lock:
            self.fake.connections_opened += 1
        super().process_request(request, client_address)

    def shutdown_request(self, request):  # type: ignore[override]
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        """Close kept-alive connections too, so pooled clients cannot keep talking to us."""
        with self._connections_lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class FakeOllama:
    """The server object tests script. Start with `start()`, stop with `stop()`."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self.requests: list[RecordedRequest] = []
        self.disconnects = 0  # responses abandoned by the client during a delay or stall
        self.connections_opened = 0  # TCP connections accepted (a client that keeps its pool opens few)
        self._lock = threading.Lock()
        self._script = _Script()
        self._cancel = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle -------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> FakeOllama:
        server = _Server((self.host, self.port), self)
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name=f"fake-ollama-{self.port}",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._cancel.set()
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
            server.drop_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def refuse_connections(self) -> None:
        """Really stop accepting: the listening socket is closed (connects get ECONNREFUSED) and
        open keep-alive connections are dropped. `accept_connections()` listens again on the same
        port."""
        if self._server is None:
            return
        self.stop()
        self._cancel = threading.Event()

    def accept_connections(self) -> None:
        if self._server is None:
            self.start()

    @property
    def accepting(self) -> bool:
        return self._server is not None

    def reset(self) -> None:
        """Back to defaults; wakes handlers stuck in a delay or stall (they drop their connection)."""
        self._cancel.set()
        with self._lock:
            self._cancel = threading.Event()
            self._script = _Script()
            self.requests.clear()
            self.disconnects = 0
            self.connections_opened = 0
        self.accept_connections()

    # ---- scripting -------------------------------------------------------------------------
    def reply(self, *texts: str) -> None:
        """Answers to chat/generate requests, in order; the last one keeps being used."""
        with self._lock:
            self._script.replies.clear()
            for text in texts[:-1]:
                self._script.replies.append(text)
            if texts:
                self._script.default_reply = texts[-1]

    def reply_with(self, fn: Callable[[list[dict[str, Any]]], str]) -> None:
        """Compute every answer from the messages received (system first)."""
        with self._lock:
            self._script.replies.clear()
            self._script.default_reply = fn

    def reply_citing(self, n: int = 2, *, words: int = 12, prefix: str = "") -> None:
        """Answer citing the first `n` distinct SourceIds found in the system prompt (or, if none
        there, in any message), each after the first `words` words of that chunk's text."""
        self.reply_with(lambda messages: _citing_answer(messages, n=n, words=words, prefix=prefix))

    def reply_from_context(self, *, cite: bool = True) -> None:
        """Answer like a careful small model: the context sentence that shares the most words with
        the question (the last user message; words of the same meaning count, `_SAME_MEANING`),
        citing its passage unless `cite` is False; the prompt's "not enough information" sentence
        when no sentence shares two words with it."""
        self.reply_with(lambda messages: _extracting_answer(messages, cite=cite))

    def reply_citing_ids(self, ids: Iterable[str], *, text: str = "According to the documents") -> None:
        """Answer citing exactly these SourceIds (known or not)."""
        cites = " ".join(f"[SourceId: {i}]" for i in ids)
        self.reply(f"{text} {cites}.")

    def reply_text_with_malformed_ids(self) -> str:
        """Answer with SourceId markers that do not match the format; returns the text."""
        text = (
            "The policy allows it [SourceId: not-a-uuid:1] and also [SourceId: 1234] "
            "or [SourceId:550e8400-e29b-41d4-a716:2] and [Source: 550e8400-e29b-41d4-a716-"
            "446655440000:0] and [SourceId: 550e8400-e29b-41d4-a716-446655440000:x]."
        )
        self.reply(text)
        return text

    def rating(self, *values: int | str) -> None:
        """Answers to the confidence prompt (detected by "Rate the support level"), in order; the
        last one keeps being used. A string is sent verbatim (e.g. "no idea")."""
        with self._lock:
            self._script.ratings.clear()
            for value in values[:-1]:
                self._script.ratings.append(value)
            if values:
                self._script.default_rating = values[-1]

    def first_token_delay(self, seconds: float) -> None:
        with self._lock:
            self._script.first_token_delay = seconds

    def token_delay(self, seconds: float) -> None:
        """Delay between streamed pieces; 0 is a zero-latency model."""
        with self._lock:
            self._script.token_delay = seconds

    def stall_after(self, n_tokens: int, seconds: float) -> None:
        """After `n_tokens` streamed pieces, go silent for `seconds` (then carry on)."""
        with self._lock:
            self._script.stall_after_tokens = n_tokens
            self._script.stall_seconds = seconds

    def cut_stream_after(self, after_tokens: int) -> None:
        """End the stream after `after_tokens` pieces without saying why: no final `done` line
        (Ollama), `[DONE]` with no finish reason (OpenAI), as llama-cpp-python's server ends a
        stream that a newer request interrupted."""
        with self._lock:
            self._script.cut_after_tokens = after_tokens

    def require_api_key(self, key: str | None) -> None:
        """`/v1/` requests without `Authorization: Bearer <key>` get 401 (None: no key needed)."""
        with self._lock:
            self._script.api_key = key

    def error_mid_stream(self, after_tokens: int, message: str | None = None) -> None:
        """Send the protocol's in-stream error after `after_tokens` pieces: Ollama's
        `{"error": ...}` line, or an OpenAI-style `data: {"error": {...}}` event."""
        with self._lock:
            self._script.error_after_tokens = after_tokens
            if message:
                self._script.error_message = message

    def fail_with(
        self,
        status: int = 500,
        times: int | None = 1,
        *,
        message: str | None = None,
        paths: Sequence[str] = (
            "/api/chat",
            "/api/generate",
            "/api/embed",
            "/api/embeddings",
            "/v1/chat/completions",
        ),
    ) -> None:
        """The next `times` requests to `paths` answer `status` with `{"error": message}`
        (times=None: all of them)."""
        with self._lock:
            self._script.fail_status = status
            self._script.fail_times = times
            self._script.fail_paths = tuple(paths)
            self._script.fail_message = message or _STATUS_MESSAGES.get(status, "error")

    def habits(self, *, citations: str | None = None, thinks_aloud: str | None = None) -> None:
        """Imitate real models' habits in every answer. `citations` rewrites the reply's
        "[SourceId: …]" markers the way small models write them (CITATION_HABITS; the numbers
        count the prompt's passages from 1); `thinks_aloud` is thinking written into the answer as
        "<think>…</think>" whatever the request's think flag says (models and Ollama versions that
        ignore it)."""
        if citations is not None and citations not in CITATION_HABITS:
            raise ValueError(f"unknown citation habit {citations!r}: one of {sorted(CITATION_HABITS)}")
        with self._lock:
            self._script.citation_habit = citations
            self._script.thinks_aloud = thinks_aloud

    def stream_pieces(self, splitter: Callable[[str], list[str]]) -> None:
        """How an answer is cut into streamed chunks (default: `split_pieces`, each word and each
        whitespace run a chunk of its own)."""
        with self._lock:
            self._script.pieces = splitter

    def on_stream_end(self, callback: Callable[[], None] | None) -> None:
        """Call `callback` after a streamed answer's last line is sent, in the handler thread that
        computed the reply (so a reply function can leave thread-local notes for it)."""
        with self._lock:
            self._script.on_stream_end = callback

    def models(self, names: Iterable[str]) -> None:
        """The pulled models (a name without a tag gets `:latest`, as Ollama lists it)."""
        with self._lock:
            self._script.models = [canonical_model_name(n) for n in names]

    def embedding_dimension(self, dimension: int, model: str | None = None) -> None:
        with self._lock:
            if model is None:
                self._script.default_embedding_dimension = dimension
            else:
                self._script.embedding_dimensions[canonical_model_name(model)] = dimension

    # ---- introspection for tests --------------------------------------------------------------
    def requests_to(self, path: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    count_tokens = staticmethod(fake_token_count)

    # ---- used by the handler ---------------------------------------------------------------
    def _record(self, method: str, path: str, body: Any) -> None:
        with self._lock:
            self.requests.append(RecordedRequest(method, path, body))

    def _note_disconnect(self) -> None:
        with self._lock:
            self.disconnects += 1

    def _take_failure(self, path: str) -> tuple[int, str] | None:
        with self._lock:
            s = self._script
            if s.fail_status is None or path not in s.fail_paths:
                return None
            if s.fail_times is not None:
                if s.fail_times <= 0:
                    return None
                s.fail_times -= 1
            return s.fail_status, s.fail_message

    def _next_reply(self, messages: list[dict[str, Any]]) -> str:
        with self._lock:
            s = self._script
            if _is_confidence_prompt(messages):
                value = s.ratings.popleft() if s.ratings else s.default_rating
                return str(value)
            reply = s.replies.popleft() if s.replies else s.default_reply
            habit, thought = s.citation_habit, s.thinks_aloud
        text = reply(messages) if callable(reply) else str(reply)
        if habit is not None:
            text = with_citation_habit(text, habit, messages)
        if thought is not None:
            text = f"<think>{thought}</think>\n\n{text}"
        return text

    def _snapshot(self) -> tuple[_Script, threading.Event]:
        with self._lock:
            return self._script, self._cancel

    def _has_model(self, name: str) -> bool:
        with self._lock:
            return canonical_model_name(name) in self._script.models

    def _model_names(self) -> list[str]:
        with self._lock:
            return list(self._script.models)

    def _dimension_for(self, canonical: str) -> int:
        with self._lock:
            return self._script.embedding_dimensions.get(canonical, self._script.default_embedding_dimension)


_STATUS_MESSAGES = {
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "server busy, please try again.  maximum pending requests exceeded",
    504: "Gateway Timeout",
    400: "invalid request",
    401: "unauthorized",
    403: "forbidden",
}


def _is_confidence_prompt(messages: list[dict[str, Any]]) -> bool:
    return any(CONFIDENCE_MARKER in str(m.get("content", "")) for m in messages)


def _citing_answer(messages: list[dict[str, Any]], *, n: int, words: int, prefix: str) -> str:
    system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    text = system if SOURCE_ID_RE.search(system) else "\n".join(str(m.get("content", "")) for m in messages)
    seen: list[tuple[str, str]] = []
    pattern = SOURCE_HEADER_RE if SOURCE_HEADER_RE.search(text) else SOURCE_ID_RE
    for match in pattern.finditer(text):
        source_id = match.group(1)
        if source_id in (s for s, _ in seen):
            continue
        seen.append((source_id, _chunk_text_after(text, match.end())))
        if len(seen) >= n:
            break
    if not seen:
        return "I don't have enough information in the available documents to answer this question."
    parts = [prefix.strip()] if prefix.strip() else []
    for source_id, chunk in seen:
        excerpt = " ".join(chunk.split()[:words]).rstrip(".")
        parts.append(f"{excerpt} [SourceId: {source_id}].")
    return " ".join(parts)


_STOP_WORDS = frozenset(
    "a an and are as at be by can do does for from how i in is it many much my of on or our the to we what "
    "when where which who why with you your".split()
)


def _extracting_answer(messages: list[dict[str, Any]], *, cite: bool) -> str:
    system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    question = next((str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "")
    wanted = {_word_key(w) for w in _WORD_RE.findall(question) if w.lower() not in _STOP_WORDS}
    best: tuple[int, str, str] = (0, "", "")
    for match in SOURCE_HEADER_RE.finditer(system):
        # A question in the passage (a FAQ heading) is never the answer; its words count for the
        # sentence under it, which answers it.
        heading: set[str] = set()
        for sentence in re.split(r"(?<=[.!?])\s+", _chunk_text_after(system, match.end())):
            words = {_word_key(w) for w in _WORD_RE.findall(sentence)}
            if sentence.rstrip().endswith("?"):
                heading = words
                continue
            shared = len(wanted & (words | heading))
            heading = set()
            if shared > best[0]:
                best = (shared, match.group(1), " ".join(sentence.split()).rstrip("."))
    shared, source_id, sentence = best
    if shared < 2:
        return "I don't have enough information in the available documents to answer this question."
    return f"{sentence} [SourceId: {source_id}]." if cite else f"{sentence}."


# Words a small language model reads as asking the same thing ("the minimum length" of "at least
# 14 characters long"): each is compared as the first of its row. A literal matcher declines such a
# question although any real model answers it; these rows are what the test model knows of meaning.
_SAME_MEANING = (
    ("least", "minimum", "minimal"),
    ("most", "maximum", "maximal"),
    ("long", "length", "character"),
)
_MEANING_KEY = {word: row[0] for row in _SAME_MEANING for word in row}


def _word_key(word: str) -> str:
    """A word as the careful model compares it: lowercased, a plural's "s" dropped, read as the
    word of the same meaning it knows."""
    word = word.lower()
    word = word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word
    return _MEANING_KEY.get(word, word)


def _chunk_text_after(text: str, start: int) -> str:
    """The chunk body that follows a SourceId header: the text between the first two `---` lines
    (spec v3 context chunk format), else whatever follows the header line."""
    rest = text[start:]
    parts = re.split(r"^---\s*$", rest, maxsplit=2, flags=re.MULTILINE)
    if len(parts) >= 2:
        return parts[1].strip()
    return SOURCE_ID_RE.split(rest, maxsplit=1)[0].strip()


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet test output
        return

    @property
    def fake(self) -> FakeOllama:
        return self.server.fake

    # ---- plumbing ---------------------------------------------------------------------------
    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return {"_raw": raw.decode("utf-8", "replace")}

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_text(self, status: int, text: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _start_stream(self, content_type: str = "application/x-ndjson") -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _send_line(self, payload: Any) -> None:
        data = json.dumps(payload).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _send_event(self, payload: Any) -> None:
        """One server-sent event: `data: <json>` (or the literal `[DONE]`) and a blank line."""
        text = payload if isinstance(payload, str) else json.dumps(payload)
        data = f"data: {text}\n\n".encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_stream(self, script: _Script) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        if script.on_stream_end is not None:
            script.on_stream_end()

    def _sleep(self, seconds: float, cancel: threading.Event) -> None:
        """Wait, but give up when reset() cancels or the client hangs up (like real Ollama, which
        stops generating when its client goes away); a hang-up is counted in `fake.disconnects`."""
        end = time.monotonic() + seconds
        while (remaining := end - time.monotonic()) > 0:
            if cancel.wait(min(remaining, 0.02)):
                raise _Aborted
            if self._peer_closed():
                self.fake._note_disconnect()
                raise _Aborted

    def _peer_closed(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    # ---- dispatch ---------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802
        self._dispatch("GET")

    def do_HEAD(self) -> None:  # noqa: N802
        self._dispatch("HEAD")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        path = self.path.split("?", 1)[0]
        body = self._read_body() if method == "POST" else None
        self.fake._record(method, path, body)
        routes: dict[tuple[str, str], Callable[[Any], None]] = {
            ("GET", "/"): lambda b: self._send_text(200, "Ollama is running"),
            ("HEAD", "/"): lambda b: self._send_text(200, "Ollama is running"),
            ("GET", "/api/version"): lambda b: self._send_json(200, {"version": "0.12.6"}),
            ("GET", "/api/tags"): self._tags,
            ("GET", "/api/ps"): lambda b: self._send_json(200, {"models": []}),
            ("POST", "/api/show"): self._show,
            ("POST", "/api/chat"): self._chat,
            ("POST", "/api/generate"): self._generate,
            ("POST", "/api/embed"): self._embed,
            ("POST", "/api/embeddings"): self._embeddings_legacy,
            ("GET", "/v1/models"): self._openai_models,
            ("POST", "/v1/chat/completions"): self._openai_chat,
        }
        route = routes.get((method, path))
        openai = path.startswith("/v1/")
        try:
            if route is None:
                self._send_text(404, "404 page not found")
                return
            if openai and not self._authorized():
                self._send_openai_error(401, "Incorrect API key provided.", "invalid_request_error")
                return
            failure = self.fake._take_failure(path)
            if failure is not None:
                if openai:
                    self._send_openai_error(failure[0], failure[1], "server_error")
                else:
                    self._send_json(failure[0], {"error": failure[1]})
                return
            route(body if isinstance(body, dict) else {})
        except (_Aborted, BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError):
            self.close_connection = True

    # ---- endpoints --------------------------------------------------------------------------
    def _tags(self, body: dict[str, Any]) -> None:
        models = []
        for name in self.fake._model_names():
            family, _, caps = _family_info(name)
            models.append(
                {
                    "name": name,
                    "model": name,
                    "modified_at": "2025-10-01T12:00:00.000000000Z",
                    "size": 2019393189,
                    "digest": hashlib.sha256(name.encode()).hexdigest(),
                    "details": {
                        "parent_model": "",
                        "format": "gguf",
                        "family": family,
                        "families": [family],
                        "parameter_size": "3.2B",
                        "quantization_level": "Q4_K_M",
                    },
                }
            )
        self._send_json(200, {"models": models})

    def _model_or_404(self, body: dict[str, Any]) -> str | None:
        name = str(body.get("model") or body.get("name") or "")
        if not name:
            self._send_json(400, {"error": "model is required"})
            return None
        if not self.fake._has_model(name):
            self._send_json(404, {"error": f'model "{name}" not found, try pulling it first'})
            return None
        return canonical_model_name(name)

    def _show(self, body: dict[str, Any]) -> None:
        name = self._model_or_404(body)
        if name is None:
            return
        family, context_length, caps = _family_info(name)
        model_info: dict[str, Any] = {
            "general.architecture": family,
            "general.parameter_count": 3212749888,
            f"{family}.context_length": context_length,
        }
        if "embedding" in caps:
            model_info[f"{family}.embedding_length"] = self.fake._dimension_for(name)
        self._send_json(
            200,
            {
                "license": "fake",
                "modelfile": f"FROM {name}\n",
                "parameters": 'stop "<|eot_id|>"',
                "template": "{{ .Prompt }}",
                "details": {
                    "parent_model": "",
                    "format": "gguf",
                    "family": family,
                    "families": [family],
                    "parameter_size": "3.2B",
                    "quantization_level": "Q4_K_M",
                },
                "model_info": model_info,
                "capabilities": caps,
                "modified_at": "2025-10-01T12:00:00.000000000Z",
            },
        )

    def _chat(self, body: dict[str, Any]) -> None:
        name = self._model_or_404(body)
        if name is None:
            return
        if "embedding" in _family_info(name)[2]:
            self._send_json(400, {"error": f'"{name}" does not support chat'})
            return
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        prompt_tokens = sum(fake_token_count(str(m.get("content", ""))) + 4 for m in messages)
        self._respond(body, name, self.fake._next_reply(messages), prompt_tokens, chat=True)

    def _generate(self, body: dict[str, Any]) -> None:
        name = self._model_or_404(body)
        if name is None:
            return
        if "embedding" in _family_info(name)[2]:
            self._send_json(400, {"error": f'"{name}" does not support generate'})
            return
        prompt = str(body.get("prompt") or "")
        system = str(body.get("system") or "")
        if not prompt and not system:
            # Ollama's "load the model" call.
            self._send_json(
                200, {"model": name, "created_at": _now(), "response": "", "done": True, "done_reason": "load"}
            )
            return
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        # raw prompts are tokenized as they are; templated ones carry a little overhead.
        overhead = 0 if body.get("raw") else 4 * len(messages)
        prompt_tokens = sum(fake_token_count(m["content"]) for m in messages) + overhead
        num_predict = (body.get("options") or {}).get("num_predict")
        reply = "" if num_predict == 0 else self.fake._next_reply(messages)
        self._respond(body, name, reply, prompt_tokens, chat=False)

    def _respond(self, body: dict[str, Any], name: str, reply: str, prompt_tokens: int, *, chat: bool) -> None:
        script, cancel = self.fake._snapshot()
        options = body.get("options") or {}
        pieces = script.pieces(reply)
        done_reason = "stop"
        num_predict = options.get("num_predict")
        if isinstance(num_predict, int) and num_predict >= 0 and len(pieces) > num_predict:
            pieces, done_reason = pieces[:num_predict], "length"
        thinking = _thinking_for(name, body.get("think"))
        if thinking and body.get("think") is None:
            # A reasoning model with no think flag puts its thinking in the answer itself.
            pieces = script.pieces(f"<think>{thinking}</think>\n\n") + pieces
            thinking = ""
        started = time.monotonic()
        self._sleep(script.first_token_delay, cancel)

        def chunk(content: str, *, done: bool, thought: str = "") -> dict[str, Any]:
            out: dict[str, Any] = {"model": name, "created_at": _now()}
            if chat:
                message: dict[str, Any] = {"role": "assistant", "content": content}
                if thought:
                    message["thinking"] = thought
                out["message"] = message
            else:
                out["response"] = content
                if thought:
                    out["thinking"] = thought
            out["done"] = done
            return out

        def final() -> dict[str, Any]:
            elapsed = max(int((time.monotonic() - started) * 1e9), 1000)
            out = chunk("", done=True)
            out.update(
                {
                    "done_reason": done_reason,
                    "total_duration": elapsed + 1_000_000,
                    "load_duration": 1_000_000,
                    "prompt_eval_count": prompt_tokens,
                    "prompt_eval_duration": 500_000,
                    "eval_count": len(pieces),
                    "eval_duration": elapsed,
                }
            )
            if not chat:
                out["context"] = [1, 2, 3]
            return out

        if body.get("stream") is False:
            for i in range(len(pieces)):
                self._stall_or_wait(script, cancel, i)
            out = final()
            if chat:
                out["message"]["content"] = "".join(pieces)
                if thinking:
                    out["message"]["thinking"] = thinking
            else:
                out["response"] = "".join(pieces)
                if thinking:
                    out["thinking"] = thinking
            self._send_json(200, out)
            return

        self._start_stream()
        if thinking:
            for piece in script.pieces(thinking):
                self._send_line(chunk("", done=False, thought=piece))
        for i, piece in enumerate(pieces):
            self._stall_or_wait(script, cancel, i)
            if script.error_after_tokens is not None and i == script.error_after_tokens:
                self._send_line({"error": script.error_message})
                self._end_stream(script)
                return
            if script.cut_after_tokens is not None and i == script.cut_after_tokens:
                self._end_stream(script)
                return
            self._send_line(chunk(piece, done=False))
        self._send_line(final())
        self._end_stream(script)

    def _stall_or_wait(self, script: _Script, cancel: threading.Event, index: int) -> None:
        if index > 0:
            self._sleep(script.token_delay, cancel)
        if script.stall_after_tokens is not None and index == script.stall_after_tokens:
            self._sleep(script.stall_seconds, cancel)

    def _embed(self, body: dict[str, Any]) -> None:
        name = self._model_or_404(body)
        if name is None:
            return
        raw = body.get("input", "")
        inputs = [raw] if isinstance(raw, str) else [str(x) for x in raw or []]
        script, cancel = self.fake._snapshot()
        self._sleep(script.first_token_delay, cancel)
        dimension = self.fake._dimension_for(name)
        self._send_json(
            200,
            {
                "model": name,
                "embeddings": [hashed_embedding(t, dimension) for t in inputs],
                "total_duration": 1_000_000,
                "load_duration": 100_000,
                "prompt_eval_count": sum(fake_token_count(t) for t in inputs),
            },
        )

    def _embeddings_legacy(self, body: dict[str, Any]) -> None:
        name = self._model_or_404(body)
        if name is None:
            return
        dimension = self.fake._dimension_for(name)
        self._send_json(200, {"embedding": hashed_embedding(str(body.get("prompt", "")), dimension)})

    # ---- the OpenAI-compatible chat API ----------------------------------------------------
    def _authorized(self) -> bool:
        script, _ = self.fake._snapshot()
        return script.api_key is None or self.headers.get("Authorization") == f"Bearer {script.api_key}"

    def _send_openai_error(self, status: int, message: str, kind: str) -> None:
        self._send_json(status, {"error": {"message": message, "type": kind, "param": None, "code": status}})

    def _openai_models(self, body: dict[str, Any]) -> None:
        data = [
            {"id": name, "object": "model", "created": 1727784000, "owned_by": "library"}
            for name in self.fake._model_names()
        ]
        self._send_json(200, {"object": "list", "data": data})

    def _openai_chat(self, body: dict[str, Any]) -> None:
        name = str(body.get("model") or "")
        if not name:
            self._send_openai_error(400, "you must provide a model parameter", "invalid_request_error")
            return
        if not self.fake._has_model(name):
            self._send_openai_error(404, f"The model `{name}` does not exist.", "invalid_request_error")
            return
        if "embedding" in _family_info(name)[2]:
            self._send_openai_error(400, f'"{name}" does not support chat', "invalid_request_error")
            return
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        prompt_tokens = sum(fake_token_count(str(m.get("content", ""))) + 4 for m in messages)
        script, cancel = self.fake._snapshot()
        pieces = script.pieces(self.fake._next_reply(messages))
        thinking = _thinking_for(name, None)  # no think flag in this protocol: thinking lands inline
        if thinking:
            pieces = script.pieces(f"<think>{thinking}</think>\n\n") + pieces
        finish_reason = "stop"
        limit = body.get("max_tokens", body.get("max_completion_tokens"))
        if isinstance(limit, int) and limit >= 0 and len(pieces) > limit:
            pieces, finish_reason = pieces[:limit], "length"
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(pieces),
            "total_tokens": prompt_tokens + len(pieces),
        }
        ident, created = f"chatcmpl-{len(self.fake.requests)}", int(time.time())
        self._sleep(script.first_token_delay, cancel)

        if not body.get("stream"):
            for i in range(len(pieces)):
                self._stall_or_wait(script, cancel, i)
            message = {"role": "assistant", "content": "".join(pieces)}
            choice = {"index": 0, "message": message, "finish_reason": finish_reason}
            self._send_json(
                200,
                {
                    "id": ident,
                    "object": "chat.completion",
                    "created": created,
                    "model": name,
                    "choices": [choice],
                    "usage": usage,
                },
            )
            return

        def event(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
            return {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": name,
                "choices": choices,
                **extra,
            }

        def delta(content: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return event([{"index": 0, "delta": content, "finish_reason": finish}])

        self._start_stream("text/event-stream")
        self._send_event(delta({"role": "assistant", "content": ""}))
        for i, piece in enumerate(pieces):
            self._stall_or_wait(script, cancel, i)
            if script.error_after_tokens is not None and i == script.error_after_tokens:
                self._send_event({"error": {"message": script.error_message, "type": "server_error"}})
                self._end_stream(script)
                return
            if script.cut_after_tokens is not None and i == script.cut_after_tokens:
                self._send_event("[DONE]")
                self._end_stream(script)
                return
            self._send_event(delta({"content": piece}))
        self._send_event(delta({}, finish_reason))
        if (body.get("stream_options") or {}).get("include_usage"):
            self._send_event(event([], usage=usage))
        self._send_event("[DONE]")
        self._end_stream(script)


def _family_info(name: str) -> tuple[str, int, list[str]]:
    base = canonical_model_name(name).split(":", 1)[0].rsplit("/", 1)[-1]
    for prefix, info in _MODEL_INFO.items():
        if base.startswith(prefix):
            return info
    return ("llama", 8192, ["completion"])


INVENTED_SOURCE_ID = "deadbeef-0000-4000-8000-000000000000:0"
# How small local models write "[SourceId: <id>]" (seen with llama3.2, qwen2.5, gemma and mistral).
_HABIT_MARKERS: dict[str, Callable[[str, int], str]] = {
    "numbered": lambda source_id, n: f"[{n}]",
    "short": lambda source_id, n: f"[S{n}]",
    "source-n": lambda source_id, n: f"[Source {n}]",
    "parenthesised": lambda source_id, n: f"(SourceId: {source_id})",
    "fullwidth": lambda source_id, n: f"【SourceId：{source_id}】",
    "spaced": lambda source_id, n: f"[ sourceid : {source_id.upper()} ]",
    "bare": lambda source_id, n: f"[{source_id}]",
    "invented": lambda source_id, n: f"[SourceId: {source_id}] [SourceId: {INVENTED_SOURCE_ID}]",
}
# Markers written against the word before them, with no space: "per year[1].", "per year【1】.".
_GLUED_MARKERS: dict[str, Callable[[str, int], str]] = {
    "numbered-glued": lambda source_id, n: f"[{n}]",
    "fullwidth-numbered": lambda source_id, n: f"【{n}】",
}
# "leading": the numbers at the start of the sentence they support, "[1] Every employee …".
LEADING = "leading"
# "grouped": adjacent markers in one bracket, "[SourceId: a, b]". "none": no marker at all, the
# habit of small instruction-tuned models that ignore the prompt's citation rule (a 0.5B one cited
# none of 24 answers).
NO_CITATIONS = "none"
CITATION_HABITS = frozenset({*_HABIT_MARKERS, *_GLUED_MARKERS, LEADING, "grouped", NO_CITATIONS})
# The habits that do write markers, each its own way.
CITATION_STYLES = CITATION_HABITS - {NO_CITATIONS}
_MARKER_RUN_RE = re.compile(r"\[SourceId:\s*[a-f0-9-]{36}:\d+\](?:\s*\[SourceId:\s*[a-f0-9-]{36}:\d+\])*")


def with_citation_habit(text: str, habit: str, messages: list[dict[str, Any]]) -> str:
    """`text`'s markers as `habit` writes them."""
    system = next((m.get("content", "") for m in messages if m.get("role") == "system"), "")
    order = {source_id: n for n, source_id in enumerate(dict.fromkeys(SOURCE_HEADER_RE.findall(system)), 1)}

    if habit == NO_CITATIONS:
        return re.sub(r"[ \t]*" + _MARKER_RUN_RE.pattern, "", text)
    if habit == LEADING:
        return _markers_leading(text, order)
    if habit in _GLUED_MARKERS:
        glued = _GLUED_MARKERS[habit]
        return re.sub(
            r"[ \t]*" + _MARKER_RUN_RE.pattern,
            lambda m: "".join(glued(i, order.get(i, len(order) + 1)) for i in SOURCE_ID_RE.findall(m.group())),
            text,
        )

    def run(match: re.Match[str]) -> str:
        ids = SOURCE_ID_RE.findall(match.group())
        if habit == "grouped":
            return f"[SourceId: {', '.join(ids)}]"
        return "".join(_HABIT_MARKERS[habit](i, order.get(i, len(order) + 1)) for i in ids)

    return _MARKER_RUN_RE.sub(run, text)


def _markers_leading(text: str, order: dict[str, int]) -> str:
    """Each sentence's markers as numbers in front of it: "[1] Every employee gets 25 days."."""
    parts = re.split(r"((?<=[.!?])[ \t]+|\n+)", text)  # sentences, and what separates them
    for i in range(0, len(parts), 2):
        ids = [source_id for run in _MARKER_RUN_RE.findall(parts[i]) for source_id in SOURCE_ID_RE.findall(run)]
        if ids:
            body = re.sub(r"[ \t]*" + _MARKER_RUN_RE.pattern, "", parts[i])
            item = re.match(r"[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+", body)  # a list item's bullet stays first
            cut = item.end() if item else 0
            numbers = "".join(f"[{order.get(s, len(order) + 1)}]" for s in ids)
            parts[i] = f"{body[:cut]}{numbers} {body[cut:]}"
    return "".join(parts)


def _thinking_for(name: str, think: Any) -> str:
    base = canonical_model_name(name).split(":", 1)[0]
    if think is False or not base.startswith(_REASONING_FAMILIES):
        return ""
    return "Okay, the user asks something. Let me look at the context first."
