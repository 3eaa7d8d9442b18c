"""The schedule of the other sources: due re-crawls of site sources, and the configured synced
folders (RAGCHAT_SYNC_FOLDERS), every RAGCHAT_SCHEDULE_MINUTES; and with them what other apps
register (routing: verified knowledge past its review date, due reminders and daily digests).

With in-process ingestion the server is the only process that may open the embedded store, so
it runs the schedule itself: `start_schedule()` (called on the server's first ASGI call, with the
recovery) starts one asyncio task on its loop. With the "tasks" backend, run `manage.py crawl_site
--due`, `manage.py sync_folder --configured`, `manage.py review_knowledge` and `manage.py
send_reminders` from cron or a systemd timer instead. Other apps add their periodic work with
`schedule_register()`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from asgiref.sync import sync_to_async
from django.conf import settings

from access.policy import admins_of

logger = logging.getLogger(__name__)

_task: asyncio.Task | None = None

# Other apps' periodic work, run every round after the sources (e.g. routing's verified knowledge
# whose review date passed): name -> a function returning a count. The documents app cannot import
# them, so they register here when Django starts.
_rounds: dict[str, Callable[[], object]] = {}


def schedule_register(name: str, work: Callable[[], object]) -> None:
    _rounds[name] = work


def run_schedule_once() -> dict:
    """One round: start every due crawl and sync every configured folder. Returns what was done."""
    done = {"crawls": 0, "folders": 0, "problems": []}
    try:
        _sources_round(done)
    except Exception as e:  # the sources failing must not stop the other apps' work
        logger.exception("scheduled sources failed")
        done["problems"].append(f"sources: {e}")
    for name, work in _rounds.items():
        try:
            done[name] = work()
        except Exception as e:  # one app's work must not stop the others'
            logger.exception("scheduled %s failed", name)
            done["problems"].append(f"{name}: {e}")
    return done


def _sources_round(done: dict) -> None:
    from documents import sites
    from documents.folders import FolderRefused, configured_folders, folder_sync
    from documents.models import Tag
    from documents.tasks import crawl_enqueue

    for site in sites.sites_due():
        run = sites.crawl_request(site=site)
        if run.started_at is None:
            crawl_enqueue(run.pk)
            done["crawls"] += 1
    for path, slugs in configured_folders():
        tags = list(Tag.objects.filter(slug__in=slugs, tenant_id="default"))
        uploader = admins_of(tenant_id="default").order_by("pk").first()
        if not tags or uploader is None:
            done["problems"].append(f"{path}: no tag {slugs} or no admin to own the documents")
            continue
        try:
            summary = folder_sync(path, tags=tags, uploader=uploader)
        except FolderRefused as e:
            done["problems"].append(str(e))
            continue
        done["folders"] += 1
        logger.info("folder synced", extra={"folder": str(path), "summary": summary.line()})


async def _loop(minutes: int) -> None:
    while True:
        try:
            await sync_to_async(run_schedule_once, thread_sensitive=True)()
        except Exception:  # a bad round must not end the schedule
            logger.exception("scheduled round failed")
        await asyncio.sleep(minutes * 60)


def start_schedule() -> None:
    global _task
    minutes = settings.RAGCHAT_SCHEDULE_MINUTES
    if minutes <= 0 or settings.RAGCHAT_INGEST_BACKEND != "inprocess" or (_task is not None and not _task.done()):
        return
    _task = asyncio.get_running_loop().create_task(_loop(minutes), name="sources-schedule")
