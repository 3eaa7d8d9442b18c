"""Site sources: a tag owner's website import, and one crawl of it.

The crawler (ragchat/services/web) finds pages; this module decides what each one means for the
index and stores it through the one pipeline (`services.document_create` / `document_replace_file`
then `services.document_ingest`):

- a page met for the first time becomes a document (source "web", its canonical URL, A5);
- a page whose text changed (SHA-256 of the extracted text) becomes that document's new version;
- a page whose text is the same is left untouched;
- after a crawl, a document whose page answered 404/410, or was refused on purpose (robots.txt
  now disallows it, a path pattern excludes it, noindex), is deleted with its chunks; when the
  crawl went through the whole site without a passing failure (timeouts, 5xx) and without hitting
  max pages, a document whose page was not met at all is deleted too. A crawl that could not reach
  the site removes nothing.

Every refusal is stored with its reason (CrawlRefusal); the run's counts are saved and pushed live
after each page to the tenant's document group ("site.changed"), where the site page listens.
Citations of web documents carry `source_url` and the source's allowlist in their chunk payload; the
chat links to the page only inside the allowlist (A4, `ragchat.services.web.urls.citation_link`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from access import policy
from documents import services
from documents.models import CrawlRefusal, CrawlRun, Document, SiteSource, Tag
from ragchat.services.web import CrawlConfig, Crawler, FetchPolicy, Page, Refusal
from ragchat.services.web.urls import canonical_url, host_allowed, normalise_domains

logger = logging.getLogger(__name__)


class SiteRefused(Exception):
    """A site source cannot be saved as given; the message is for the owner."""


# ------------------------------------------------------------------------------------- sources


def _lines(value: str | Sequence[str]) -> list[str]:
    items = value.splitlines() if isinstance(value, str) else list(value)
    return [item.strip() for item in items if item and item.strip()]


def site_create(
    *,
    user,
    name: str,
    tag: Tag,
    start_urls: str | Sequence[str],
    allowed_domains: str | Sequence[str] = "",
    max_pages: int = 100,
    max_depth: int = 3,
    include_patterns: str | Sequence[str] = "",
    exclude_patterns: str | Sequence[str] = "",
    recrawl_hours: int = 0,
    check_permissions: bool = True,
) -> SiteSource:
    """Validate and store a site source. An empty allowlist means the start URLs' own hosts."""
    if check_permissions and not policy.uploadable_tags(user=user).filter(pk=tag.pk).exists():
        raise SiteRefused(f"You may not add sources to the tag “{tag.name}”.")
    starts = []
    for raw in _lines(start_urls):
        url = canonical_url(raw)
        if url is None:
            raise SiteRefused(f"“{raw}” is not an http(s) address.")
        starts.append(url)
    if not starts:
        raise SiteRefused("Give at least one start URL.")
    domains = normalise_domains(_lines(allowed_domains)) or normalise_domains(
        urlsplit(u).hostname or "" for u in starts
    )
    ceiling = normalise_domains(settings.RAG_ALLOWLIST_DOMAINS)
    if ceiling:
        outside = [d for d in domains if not host_allowed(f"https://{d}/", ceiling)]
        if outside:
            raise SiteRefused(
                f"Not in this server's allowlist (RAG_ALLOWLIST_DOMAINS): {', '.join(outside)}. "
                f"Allowed: {', '.join(ceiling)}."
            )
    for url in starts:
        if not host_allowed(url, domains):
            raise SiteRefused(f"The start URL {url} is outside the allowed domains ({', '.join(domains)}).")
    if not 1 <= max_pages <= settings.RAG_MAX_PAGES:
        raise SiteRefused(f"Max pages must be between 1 and {settings.RAG_MAX_PAGES} (RAG_MAX_PAGES).")
    if not 0 <= max_depth <= 20:
        raise SiteRefused("Max depth must be between 0 and 20.")
    patterns = _lines(include_patterns), _lines(exclude_patterns)
    for pattern in [*patterns[0], *patterns[1]]:
        if not pattern.startswith("/") and not pattern.startswith("*"):
            raise SiteRefused(f"Path patterns start with / or * (e.g. /docs/*): “{pattern}”.")
    site = SiteSource.objects.create(
        tenant_id=tag.tenant_id,
        name=name.strip()[:200] or urlsplit(starts[0]).hostname or starts[0],
        tag=tag,
        start_urls=starts,
        allowed_domains=domains,
        max_pages=max_pages,
        max_depth=max_depth,
        include_patterns=patterns[0],
        exclude_patterns=patterns[1],
        recrawl_hours=recrawl_hours,
        next_crawl_at=timezone.now() + timedelta(hours=recrawl_hours) if recrawl_hours else None,
        created_by=user,
    )
    return site


def site_delete(*, site: SiteSource, actor=None) -> int:
    """Delete the source and every document it imported (chunks first); returns how many."""
    removed = 0
    for document in Document.objects.filter(site=site):
        services.document_delete(document=document, actor=actor, reason=f"its site source “{site.name}” was deleted")
        removed += 1
    site.delete()
    return removed


def crawl_request(*, site: SiteSource) -> CrawlRun:
    """A queued run for the site, or the one already queued or running (one at a time per site)."""
    with transaction.atomic():
        SiteSource.objects.select_for_update().filter(pk=site.pk).first()
        busy = site.runs.filter(status__in=[CrawlRun.Status.QUEUED, CrawlRun.Status.RUNNING]).first()
        if busy is not None:
            return busy
        return CrawlRun.objects.create(site=site, stage="Waiting to start")


INTERRUPTED_CRAWL = "The crawl was interrupted (the server or the command stopped); nothing was removed. Crawl again."


def crawls_fail_interrupted(*, started_before) -> int:
    """Runs left queued or running by a process that stopped: failed with the reason, so the site
    can be crawled again. Pages they stored stay (they are complete documents)."""
    return CrawlRun.objects.filter(
        status__in=[CrawlRun.Status.QUEUED, CrawlRun.Status.RUNNING], created_at__lt=started_before
    ).update(status=CrawlRun.Status.FAILED, stage="Failed", error=INTERRUPTED_CRAWL, finished_at=timezone.now())


def sites_due(*, now=None) -> list[SiteSource]:
    now = now or timezone.now()
    return list(SiteSource.objects.filter(recrawl_hours__gt=0, next_crawl_at__lte=now))


# ------------------------------------------------------------------------------------- one crawl


def crawl_config(site: SiteSource) -> CrawlConfig:
    return CrawlConfig(
        start_urls=list(site.start_urls),
        allowed_domains=list(site.allowed_domains),
        max_pages=min(site.max_pages, settings.RAG_MAX_PAGES),
        max_depth=site.max_depth,
        include=list(site.include_patterns),
        exclude=list(site.exclude_patterns),
        delay=settings.RAGCHAT_CRAWL_DELAY_SECONDS,
        fetch=FetchPolicy(
            allow_private=settings.RAGCHAT_CRAWL_ALLOW_PRIVATE,
            max_bytes=settings.RAGCHAT_CRAWL_MAX_PAGE_BYTES,
            timeout=settings.RAGCHAT_CRAWL_TIMEOUT_SECONDS,
        ),
    )


def site_group(tenant_id: str) -> str:
    return services.progress_group(tenant_id)


async def broadcast_site(site_id: int, tenant_id: str) -> None:
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(site_group(tenant_id), {"type": "site.changed", "site_id": site_id})
    except Exception as e:  # progress is a nicety
        logger.warning("site progress push failed: %s", e)


@dataclass(frozen=True)
class _Stored:
    document_id: str | None  # to ingest now (new or changed); None: nothing to index
    outcome: str  # added | changed | unchanged | refused


def page_bytes(page: Page) -> bytes:
    """What a page's document stores as its original: the main text as Markdown, under its title."""
    text = page.text.strip()
    if page.title and not text.startswith("# "):
        text = f"# {page.title}\n\n{text}"
    return (text + "\n").encode("utf-8")


def _page_filename(url: str) -> str:
    parts = urlsplit(url)
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{parts.hostname}{parts.path}".strip("/")).strip("-")
    return (stem[:120] or "page") + ".md"


def _store_page(run: CrawlRun, page: Page) -> _Stored:
    site = run.site
    data = page_bytes(page)
    existing = Document.objects.filter(tenant_id=site.tenant_id, source_url=page.url).first()
    if existing is not None and existing.site_id not in (None, site.pk):
        _refuse(run, page.url, "already imported by another site source", "duplicate")
        return _Stored(None, "refused")
    metadata = {"source_url": page.url, "allowed_domains": list(site.allowed_domains)}
    try:
        if existing is None:
            document = services.document_create(
                user=site.created_by or policy.admins_of(tenant_id=site.tenant_id).first(),
                data=data,
                filename=_page_filename(page.url),
                tags=[site.tag],
                check_permissions=False,
                source={
                    "source_kind": Document.Source.WEB,
                    "source_url": page.url,
                    "site": site,
                    "title": page.title[:300],
                    "chunk_metadata": metadata,
                },
            )
            return _Stored(str(document.pk), "added")
        if services.content_hash(data) == existing.content_hash:
            if existing.status == Document.Status.READY:
                return _Stored(None, "unchanged")
            services.document_requeue(document=existing)
            return _Stored(str(existing.pk), "changed")
        existing.title = page.title[:300] or existing.title
        existing.chunk_metadata = metadata
        services.document_replace_file(document=existing, data=data, filename=_page_filename(page.url))
        return _Stored(str(existing.pk), "changed")
    except services.DuplicateDocument as e:
        other = e.existing.source_url or e.existing.title
        _refuse(run, page.url, f"same text as {other}; kept once", "duplicate")
    except services.UploadRefused as e:
        _refuse(run, page.url, str(e), "refused")
    return _Stored(None, "refused")


def _refuse(run: CrawlRun, url: str, reason: str, kind: str) -> None:
    CrawlRefusal.objects.create(run=run, url=url[:2000], reason=reason[:500], kind=kind)
    CrawlRun.objects.filter(pk=run.pk).update(refused=run.refused + 1)
    run.refused += 1


def _remove_gone(run: CrawlRun, *, keep: set[str], gone: set[str], complete: bool) -> int:
    removed = 0
    for document in Document.objects.filter(site=run.site):
        url = document.source_url
        if url in gone or (complete and url not in keep):
            try:
                services.document_delete(document=document, reason="site crawl: the page is gone")
            except Exception as e:  # the store is down: keep the row, the next crawl tries again
                logger.warning("could not remove gone page %s: %s", url, e)
                continue
            removed += 1
    return removed


async def crawl_run(run_id: int) -> CrawlRun:
    """Crawl the site of a queued run to the end: store, update or keep each page, then remove the
    pages that are gone. Never raises for a site problem: the run ends failed with the reason."""
    claimed = await CrawlRun.objects.filter(pk=run_id, status=CrawlRun.Status.QUEUED).aupdate(
        status=CrawlRun.Status.RUNNING, started_at=timezone.now(), stage="Reading robots.txt and the start pages"
    )
    run = await CrawlRun.objects.select_related("site", "site__tag", "site__created_by").aget(pk=run_id)
    if not claimed:
        return run
    site = run.site
    await broadcast_site(site.pk, site.tenant_id)
    keep: set[str] = set()
    gone: set[str] = set()

    async def save(**fields):
        for key, value in fields.items():
            setattr(run, key, value)
        await CrawlRun.objects.filter(pk=run.pk).aupdate(**fields)
        await broadcast_site(site.pk, site.tenant_id)

    async def on_page(page: Page) -> None:
        keep.add(page.url)
        stored = await sync_to_async(_store_page, thread_sensitive=True)(run, page)
        counts = {"pages": run.pages + 1, "stage": f"Indexing {page.url}"[:300]}
        if stored.outcome in ("added", "changed", "unchanged"):
            counts[stored.outcome] = getattr(run, stored.outcome) + 1
        else:
            counts["refused"] = run.refused
        await save(**counts)
        if stored.document_id is not None:
            result = await services.document_ingest(stored.document_id)
            if result.status != Document.Status.READY:
                await save(failed=run.failed + 1)

    async def on_refusal(refusal: Refusal) -> None:
        if refusal.kind in ("gone", "refused") and refusal.key:
            # 404/410, or deliberately not taken (robots, patterns, noindex, allowlist): not kept
            gone.add(refusal.key)
        await sync_to_async(_refuse, thread_sensitive=True)(run, refusal.url, refusal.reason, refusal.kind)
        await broadcast_site(site.pk, site.tenant_id)

    try:
        stats = await Crawler(crawl_config(site)).run(on_page=on_page, on_refusal=on_refusal)
    except Exception as e:
        logger.exception("crawl of site %s failed", site.pk)
        await save(
            status=CrawlRun.Status.FAILED,
            stage="Failed",
            error=f"The crawl stopped unexpectedly ({type(e).__name__}: {e}); nothing was removed.",
            finished_at=timezone.now(),
        )
        return run
    gone -= keep
    if not stats.pages and not run.unchanged:
        # Nothing reached (site down, every start URL refused): remove nothing, say why.
        await save(
            status=CrawlRun.Status.FAILED,
            stage="Failed",
            seconds=stats.seconds,
            error="No page could be taken from this site; see the refusals below. Nothing was removed.",
            finished_at=timezone.now(),
        )
        await _schedule_next(site)
        return run
    removed = await sync_to_async(_remove_gone, thread_sensitive=True)(
        run, keep=keep, gone=gone, complete=stats.complete
    )
    note = "" if stats.complete else " (partial crawl: pages not reached were kept)"
    await save(
        status=CrawlRun.Status.DONE,
        stage=f"Done in {stats.seconds:.1f} s, {stats.pages_per_second:.2f} pages/s{note}",
        removed=removed,
        seconds=stats.seconds,
        finished_at=timezone.now(),
    )
    await _schedule_next(site)
    logger.info("site crawled", extra={"site_id": site.pk, "pages": stats.pages, "seconds": stats.seconds})
    return run


async def _schedule_next(site: SiteSource) -> None:
    if site.recrawl_hours:
        await SiteSource.objects.filter(pk=site.pk).aupdate(
            next_crawl_at=timezone.now() + timedelta(hours=site.recrawl_hours)
        )


def crawl_run_sync(run_id: int) -> CrawlRun:
    return async_to_sync(crawl_run)(run_id)
