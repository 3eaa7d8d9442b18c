"""The schedule of the other sources: due re-crawls of site sources, and the configured synced
folders (RAGCHAT_SYNC_FOLDERS), every RAGCHAT_SCHEDULE_MINUTES; and with them the knowledge loop's
due reminders and daily digests (routing/reminders.py).

With in-process ingestion the server is the only process that may open the embedded store, so
it runs the schedule itself: `start_schedule()` (called on the server's first ASGI call, with the
recovery) starts one asyncio task on its loop. With the "tasks" backend, run `manage.py crawl_site
--due`, `manage.py sync_folder --configured` and `manage.py send_reminders` from cron or a systemd
timer instead.
"""

from __future__ import annotations

import asyncio
import logging

from asgiref.sync import sync_to_async
from django.conf import settings

from access.policy import admins_of

logger = logging.getLogger(__name__)

_task: asyncio.Task | None = None


def run_schedule_once() -> dict:
    """One round: start every due crawl and sync every configured folder. Returns what was done."""
    from documents import sites
    from documents.folders import FolderRefused, configured_folders, folder_sync
    from documents.models import Tag
    from documents.tasks import crawl_enqueue

    done = {"crawls": 0, "folders": 0, "problems": []}
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
    return done


def run_reminders_once() -> dict:
    """The knowledge loop's due reminders and daily digests (routing/reminders.py)."""
    from routing.reminders import run_due

    return run_due()


async def _loop(minutes: int) -> None:
    while True:
        for name, step in (("sources", run_schedule_once), ("reminders", run_reminders_once)):
            try:
                await sync_to_async(step, thread_sensitive=True)()
            except Exception:  # a bad round must not end the schedule
                logger.exception("scheduled %s round failed", name)
        await asyncio.sleep(minutes * 60)


def start_schedule() -> None:
    global _task
    minutes = settings.RAGCHAT_SCHEDULE_MINUTES
    if minutes <= 0 or settings.RAGCHAT_INGEST_BACKEND != "inprocess" or (_task is not None and not _task.done()):
        return
    _task = asyncio.get_running_loop().create_task(_loop(minutes), name="sources-schedule")
