"""Ingestion pauses while a backup reads the instance, so the backup's database and vectors agree.

A document's ingestion changes both stores: its row (processing, then ready with a chunk count) and
its points. A backup reads the database, then the vectors: an ingestion running in between would
leave the restored row and points of two different moments (a row still "processing" with half its
points, or a row of the old version with the new version's points). So every ingestion holds a
shared lock from claiming the row until its last write, and a backup takes the lock exclusively for
its database snapshot and vector export: it waits for the running ingestions to finish, and new ones
wait for it (the documents stay queued, their pages say "Waiting to start").

The lock is an advisory file lock (flock) in RAGCHAT_DATA_DIR: it holds between the processes of
one machine (the server, ingestion workers, `manage.py backup`), and it is released by the kernel
when a process dies, so a crashed backup never stops ingestion for good.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from django.conf import settings

LOCK_NAME = "ingestion.lock"


class HoldTimeout(Exception):
    """Ingestion went on for longer than the backup would wait."""


def _lock_path() -> Path:
    path = Path(settings.DATA_DIR) / LOCK_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _open() -> int:
    return os.open(_lock_path(), os.O_RDWR | os.O_CREAT, 0o600)


@asynccontextmanager
async def ingestion_running() -> AsyncIterator[None]:
    """Held by one document's ingestion: waits while a backup holds ingestion."""
    fd = _open()
    try:
        await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


@contextmanager
def ingestion_held(*, timeout: float) -> Iterator[None]:
    """Held by a backup: waits up to `timeout` seconds for the running ingestions to finish
    (HoldTimeout after), then keeps new ones waiting until the block ends."""
    fd = _open()
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise HoldTimeout(timeout) from None
                time.sleep(0.1)
        yield
    finally:
        os.close(fd)
