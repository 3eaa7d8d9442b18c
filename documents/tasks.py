"""Where ingestion runs.

- "inprocess" (embedded default): bounded asyncio tasks on the server's own event loop. The embedded
  Qdrant can be opened by one process only, and the server already holds it, so ingestion must
  live in that process; parsing, chunking and the local model run in worker threads, so the loop
  keeps serving pages and websockets. At most RAGCHAT_INGEST_CONCURRENCY documents run at once.
- "tasks" (scale-out, QDRANT_URL set): django-tasks with its database backend (django-tasks-db);
  `manage.py db_worker --queue-name ingestion` processes pick the documents up. Why django-tasks:
  it is the backport of Django 6.0's built-in tasks API (no new concepts, moves into Django core),
  and its database backend needs no broker beyond the PostgreSQL we already run.

A sync view runs in a worker thread, away from the server's loop: the ASGI application records the
loop it is served on (`note_server_loop`, called by documents.recovery's wrapper on every call) and
the view hands the ingestion to it. Outside a server (management commands, tests with the sync
client) there is no long-lived loop to hand work to, so ingestion runs to completion before enqueue
returns.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django_tasks import task

logger = logging.getLogger(__name__)

_semaphores: dict[int, asyncio.Semaphore] = {}
_running: set[asyncio.Task] = set()  # strong references: the loop only keeps weak ones
_served_on: asyncio.AbstractEventLoop | None = None  # the loop of the latest ASGI call


@task(queue_name="ingestion")
def ingest_document_task(document_id: str) -> str:
    from documents.services import document_ingest

    result = async_to_sync(document_ingest)(document_id)
    return result.status


async def _run_bounded(document_id: str) -> None:
    from documents.services import document_ingest

    loop = asyncio.get_running_loop()
    semaphore = _semaphores.get(id(loop))
    if semaphore is None:
        semaphore = _semaphores[id(loop)] = asyncio.Semaphore(max(1, settings.RAGCHAT_INGEST_CONCURRENCY))
    async with semaphore:
        try:
            await document_ingest(document_id)
        except Exception:  # document_ingest records failures itself; this is a last resort
            logger.exception("ingestion task for %s crashed", document_id)


def _spawn(coroutine: Coroutine[Any, Any, None], name: str) -> asyncio.Task:
    # A fresh context: the caller's (a sync view's request) carries asgiref's per-request executor,
    # which is shut down when the response is sent; the work's sync_to_async calls must not use it.
    task_ = asyncio.get_running_loop().create_task(coroutine, name=name, context=contextvars.Context())
    _running.add(task_)
    task_.add_done_callback(_running.discard)
    return task_


async def _spawn_on_loop(make: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
    _spawn(make(), name)


def _enqueue(
    *,
    task_: Any,
    arg: Any,
    make: Callable[[], Coroutine[Any, Any, None]],
    name: str,
    inline: Callable[[], object],
) -> str:
    """Run work where ingestion runs: the `task_` queue ("worker"), a task on the running loop or on
    the server's loop ("background"), else `inline` to completion here ("inline")."""
    if settings.RAGCHAT_INGEST_BACKEND == "tasks":
        task_.enqueue(arg)
        return "worker"
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        _spawn(make(), name)
        return "background"
    loop = _server_loop()
    if loop is not None:
        asyncio.run_coroutine_threadsafe(_spawn_on_loop(make, name), loop).result(timeout=10)
        return "background"
    inline()
    return "inline"


def note_server_loop() -> None:
    """Remember the running loop as the server's; called from the ASGI application's coroutine."""
    global _served_on
    _served_on = asyncio.get_running_loop()


def _server_loop() -> asyncio.AbstractEventLoop | None:
    """The server's event loop, while it serves (a loop a test ran earlier is closed or stopped)."""
    loop = _served_on
    if loop is not None and loop.is_running() and not loop.is_closed():
        return loop
    return None


def ingestion_enqueue(document_id) -> str:
    """Start ingesting a queued document; returns how ("worker", "background" or "inline")."""
    from documents.services import document_ingest_sync

    document_id = str(document_id)
    return _enqueue(
        task_=ingest_document_task,
        arg=document_id,
        make=lambda: _run_bounded(document_id),
        name=f"ingest-{document_id}",
        inline=lambda: document_ingest_sync(document_id),
    )


async def wait_for_background_ingestion(timeout: float = 60) -> None:
    """Let running in-process ingestions finish (graceful shutdown, tests)."""
    if _running:
        await asyncio.wait(list(_running), timeout=timeout)


# ------------------------------------------------------------------------------------- site crawls


@task(queue_name="ingestion")
def crawl_site_task(run_id: int) -> str:
    from documents.sites import crawl_run

    return async_to_sync(crawl_run)(run_id).status


async def _crawl(run_id: int) -> None:
    from documents.sites import crawl_run

    try:
        await crawl_run(run_id)
    except Exception:  # crawl_run records failures itself; this is a last resort
        logger.exception("crawl task for run %s crashed", run_id)


def crawl_enqueue(run_id: int) -> str:
    """Start a queued crawl run where ingestion runs ("worker", "background" or "inline"). The crawl
    ingests its pages one after another itself, so it holds at most one ingestion at a time."""
    from documents.sites import crawl_run_sync

    return _enqueue(
        task_=crawl_site_task,
        arg=run_id,
        make=lambda: _crawl(run_id),
        name=f"crawl-{run_id}",
        inline=lambda: crawl_run_sync(run_id),
    )
