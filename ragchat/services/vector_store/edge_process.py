"""The embedded store in a child process of its own (QDRANT_EDGE_PROCESS, on by default).

Qdrant Edge holds Python's GIL for the whole of each call: a search (about 3 ms of a 10k-chunk
store, with its hits made into Python objects), every upsert of an ingestion and the minutes of a
settle at 100k chunks. In the server that time is taken from the event loop that streams every
answer: in a burst of 200 questions the searches were a fifth of the loop's work before the first
tokens (py-spy --gil), and an upload stalled every open chat while its chunks were written. In a
child the engine has a GIL of its own, on the other core.

`EdgeProcessBackend` is the `Backend` the server uses; the child runs the one `EdgeBackend` per
proxy, so the engine's rules (one opener per shard, writes one at a time, reads alongside) are
EdgeBackend's, unchanged. Calls are pickled over the child's pipes (ragchat.services.child) and
run concurrently in the child; their replies come back in any order. A child that dies fails the
calls in flight with VectorStoreError and is started again by the next call, which first opens
again every shard that was open (the data is on disk: each write is flushed before it returns).
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import logging
import pickle
import threading
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any

from ragchat.services import child
from ragchat.services.errors import VectorStoreError
from ragchat.services.vector_store.access import Conditions
from ragchat.services.vector_store.backend import CollectionMeta, Hit, Stage
from ragchat.services.vector_store.payload import PointData

logger = logging.getLogger(__name__)

ENTRY = "ragchat.services.vector_store.edge_process:serve"
RELEASE_TIMEOUT_SECONDS = 60.0  # a release flushes the shard; settle-sized work may be queued before it
_ids = itertools.count(1)


class EdgeProcessBackend:
    """Qdrant Edge at {path}/{collection}, run by the store's child process (see the module)."""

    name = "edge"

    def __init__(self, *, path: str | Path, collection: str) -> None:
        self.root = Path(path)
        self.collection = collection
        self.shard_path = str((self.root / collection).resolve())
        self.meta_path = self.root / f"{collection}.meta.json"
        self.id = next(_ids)
        self.opened: CollectionMeta | None = None  # what open() was given: opened again after a restart
        self.generation = -1  # the child generation it was opened in

    async def _call(self, method: str, *args: Any) -> Any:
        return await asyncio.wrap_future(_store_process().request(self, method, args))

    async def open(self, meta: CollectionMeta) -> CollectionMeta | None:
        existing = await self._call("open", str(self.root), self.collection, meta)
        self.opened = meta
        return existing

    async def settle(self) -> None:
        await self._call("settle")

    async def close(self) -> None:
        if self.opened is not None:
            self.opened = None
            await self._call("close")

    def release_sync(self) -> None:
        """Drop this backend's hold on the shard (the child's EdgeBackend flushes and closes it)."""
        if self.opened is None:
            return
        self.opened = None
        try:
            _store_process().request(self, "close", ()).result(timeout=RELEASE_TIMEOUT_SECONDS)
        except Exception as e:  # the child is gone: nothing is held
            logger.warning("store release: %s", e)

    async def drop(self) -> None:
        self.opened = None
        await self._call("drop", str(self.root), self.collection)

    async def export(self, batch_size: int = 512) -> AsyncIterator[list[PointData]]:
        token = await self._call("export_start", batch_size)
        while True:
            batch = await self._call("export_next", token)
            if batch is None:
                return
            yield batch

    async def upsert(self, points: Sequence[PointData]) -> None:
        await self._call("upsert", list(points))

    async def delete(self, conditions: Conditions) -> None:
        await self._call("delete", conditions)

    async def set_payload(self, conditions: Conditions, payload: dict[str, Any]) -> None:
        await self._call("set_payload", conditions, dict(payload))

    async def count(self, conditions: Conditions) -> int:
        return await self._call("count", conditions)

    async def distinct_count(self, key: str) -> int:
        return await self._call("distinct_count", key)

    async def search_stages(self, stages: Sequence[Stage]) -> list[list[Hit]]:
        return await self._call("search_stages", list(stages))

    async def fetch(self, ids: Sequence[str], *, with_dense: bool = False) -> list[Hit]:
        return await self._call("fetch", list(ids), with_dense)


class StoreProcess:
    """The one store child of this process: requests out under a lock, replies read by a thread of
    its own and handed to their futures (which any thread or event loop may wait on)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: Any = None
        self._pending: dict[int, Future] = {}
        self._requests = itertools.count(1)
        self.generation = 0

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def request(self, backend: EdgeProcessBackend, method: str, args: tuple) -> Future:
        """Send one call; its future gets the result (or the error) when the child replies. The
        arguments go as a pickle of their own, so a call the child cannot read fails alone."""
        future: Future = Future()
        try:
            blob = child.dumps(args)
        except Exception as e:
            future.set_exception(VectorStoreError(f"a store call ({method}) could not be sent: {e}"))
            return future
        with self._lock:
            process = self._started()
            messages = []
            if method == "open":
                backend.generation = self.generation
            elif backend.opened is not None and backend.generation != self.generation:
                # A new child: open the shard again before this call (the reply is only logged).
                reopen: Future = Future()
                reopen.add_done_callback(_log_reopen)
                again = child.dumps((str(backend.root), backend.collection, backend.opened))
                messages.append((self._add(reopen), backend.id, "open", again))
                backend.generation = self.generation
            messages.append((self._add(future), backend.id, method, blob))
            try:
                for message in messages:
                    child.send(process.stdin, message)
            except (OSError, ValueError) as e:
                self._lost(process, f"the store process stopped: {e}")
        return future

    def _add(self, future: Future) -> int:
        request_id = next(self._requests)
        self._pending[request_id] = future
        return request_id

    def _started(self) -> Any:
        if self._process is not None:
            if self._process.poll() is None:
                return self._process
            self._lost(self._process, "the store process stopped")  # before its reader saw it
        process = child.start(ENTRY)
        self._process = process
        self.generation += 1
        threading.Thread(target=self._read, args=(process,), name="store-replies", daemon=True).start()
        return process

    def _read(self, process: Any) -> None:
        stdout: IO[bytes] = process.stdout
        while True:
            try:
                request_id, ok, blob = child.receive(stdout)
            except Exception as e:  # the pipe closed (or its framing broke): the child is done
                with self._lock:
                    self._lost(process, f"the store process stopped: {e}")
                return
            with self._lock:
                future = self._pending.pop(request_id, None)
            if future is None or future.done():
                continue
            try:
                value = pickle.loads(blob)
            except Exception as e:  # a reply this process cannot load fails its own call only
                ok, value = False, VectorStoreError(f"the store's reply could not be read: {e}")
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value if isinstance(value, Exception) else VectorStoreError(str(value)))

    def _lost(self, process: Any, why: str) -> None:
        """(under the lock) `process` is gone: fail what waits on it; the next call starts another."""
        if self._process is not process:
            return
        self._process = None
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(VectorStoreError(why))
        try:
            process.kill()
        except OSError:
            pass

    def close(self) -> None:
        """Close the child's requests: it releases every shard (flushing them) and ends."""
        with self._lock:
            process, self._process = self._process, None
        if process is None:
            return
        try:
            process.stdin.close()
            process.wait(timeout=RELEASE_TIMEOUT_SECONDS)
        except Exception:  # it is going away either way
            process.kill()
            process.wait()


def _log_reopen(future: Future) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.warning("store reopened after a restart failed: %s", future.exception())


_process: StoreProcess | None = None
_process_lock = threading.Lock()


def _store_process() -> StoreProcess:
    global _process
    with _process_lock:
        if _process is None:
            _process = StoreProcess()
        return _process


def store_process_pid() -> int | None:
    """The running store child's pid, if any (health and tests)."""
    return _process.pid if _process is not None else None


@atexit.register
def _close_process() -> None:
    if _process is not None:
        _process.close()


# ---- the child -------------------------------------------------------------------------------


def serve() -> None:
    """The child: requests in on stdin, run concurrently on one event loop (each engine call in a
    worker thread, as in-process), replies out on stdout in the order they finish, until stdin
    closes; then every shard is released (flushed and closed)."""
    inp, out = child.replies_pipe()
    asyncio.run(_serve(inp, out))


async def _serve(inp: IO[bytes], out: IO[bytes]) -> None:
    from ragchat.services.vector_store.edge import EdgeBackend

    loop = asyncio.get_running_loop()
    backends: dict[int, EdgeBackend] = {}
    opening: dict[int, asyncio.Task] = {}  # each backend's calls wait for its latest open
    exports: dict[int, AsyncIterator[list[PointData]]] = {}
    tasks: set[asyncio.Task] = set()
    ended = loop.create_future()

    def reply(request_id: int, ok: bool, value: Any) -> None:
        try:
            blob = child.dumps(value)
        except Exception as e:  # a value that does not pickle
            why = f"{type(value).__name__}: {value}" if not ok else f"the store's reply could not be sent: {e}"
            ok, blob = False, child.dumps(VectorStoreError(why))
        try:
            child.send(out, (request_id, ok, blob))
        except BrokenPipeError:  # the server is gone
            pass

    async def run(backend: EdgeBackend | None, method: str, blob: bytes, waits: asyncio.Task | None) -> Any:
        if waits is not None:
            await asyncio.gather(waits, return_exceptions=True)
        try:
            args = pickle.loads(blob)
        except Exception as e:
            raise VectorStoreError(f"the store could not read a call ({method}): {e}") from None
        if backend is None:
            raise VectorStoreError("vector store is not initialised: call initialize() first")
        if method == "open":
            return await backend.open(args[2])
        if method == "export_start":
            token = next(_ids)
            exports[token] = backend.export(args[0]).__aiter__()
            return token
        if method == "export_next":
            batches = exports.get(args[0])
            if batches is None:
                return None
            try:
                return await batches.__anext__()
            except StopAsyncIteration:
                exports.pop(args[0], None)
                return None
        if method == "fetch":
            return await backend.fetch(args[0], with_dense=args[1])
        if method == "drop":
            return await backend.drop()
        return await getattr(backend, method)(*args)

    async def answer(request_id: int, work: Any) -> None:
        try:
            value = await work
        except Exception as e:
            reply(request_id, False, e)
        else:
            reply(request_id, True, value)

    def take(message: tuple) -> None:
        request_id, backend_id, method, blob = message
        if method in ("open", "drop") and backend_id not in backends:
            root, collection = pickle.loads(blob)[:2]  # plain strings
            backends[backend_id] = EdgeBackend(path=root, collection=collection)
        backend = backends.get(backend_id)
        task = loop.create_task(answer(request_id, run(backend, method, blob, opening.get(backend_id))))
        if method == "open":
            opening[backend_id] = task
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def read() -> None:
        while True:
            try:
                message = child.receive(inp)
            except Exception:  # the pipe closed (or its framing broke): the child ends
                loop.call_soon_threadsafe(ended.set_result, None)
                return
            loop.call_soon_threadsafe(take, message)

    threading.Thread(target=read, name="store-requests", daemon=True).start()
    await ended
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)
    for backend in backends.values():
        try:
            await asyncio.to_thread(backend.release_sync)
        except Exception as e:  # one shard's close must not keep the others open
            logger.warning("store child: release of %s failed: %s", backend.shard_path, e)
