"""Crawl website sources now, in this process, with a summary per site.

    manage.py crawl_site 3 [7 ...]                 # the site sources with these ids
    manage.py crawl_site --due                     # every source whose re-crawl is due (cron, "tasks" backend)
    manage.py crawl_site --configured --tag help   # the site of RAG_CRAWL_START_URLS / RAG_ALLOWLIST_DOMAINS

In embedded mode run it while the server is stopped (the server re-crawls due sources itself).
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from access.policy import admins_of
from documents import sites
from documents.management.commands._indexing import close_vector_store, open_vector_store
from documents.models import SiteSource, Tag
from ragchat.services.web.urls import canonical_url, normalise_domains

CONFIGURED_NAME = "Configured site (RAG_CRAWL_START_URLS)"


class Command(BaseCommand):
    help = "Crawl website sources now (by id, the due ones, or the configured one)."

    def add_arguments(self, parser):
        parser.add_argument("site_ids", nargs="*", type=int)
        parser.add_argument("--due", action="store_true")
        parser.add_argument("--configured", action="store_true")
        parser.add_argument("--tag", help="tag slug of the configured site")
        parser.add_argument("--tenant", default="default")

    def handle(self, *args, site_ids, due, configured, tag, tenant, **options):
        chosen = list(SiteSource.objects.filter(pk__in=site_ids))
        missing = set(site_ids) - {s.pk for s in chosen}
        if missing:
            raise CommandError(f"No site source with id {', '.join(map(str, sorted(missing)))}.")
        if due:
            chosen += sites.sites_due()
        if configured:
            chosen.append(self._configured(tag, tenant))
        if not chosen:
            raise CommandError("Name site source ids, --due or --configured.")
        open_vector_store()
        if not settings.RAG.qdrant_url:
            # Embedded store: this command holds it, so no server or worker is crawling now; a run
            # still marked busy was interrupted and must not block the site.
            from django.utils import timezone

            sites.crawls_fail_interrupted(started_before=timezone.now())
        try:
            for site in chosen:
                run = sites.crawl_request(site=site)
                if run.started_at is not None:
                    self.stderr.write(f"{site.name}: a crawl is already running.")
                    continue
                run = sites.crawl_run_sync(run.pk)
                run.refresh_from_db()
                line = (
                    f"{site.name}: {run.get_status_display().lower()} in {run.seconds:.1f} s — {run.pages} pages "
                    f"({run.added} new, {run.changed} changed, {run.unchanged} unchanged), {run.removed} removed, "
                    f"{run.refused} refused, {run.failed} failed."
                )
                for refusal in run.refusals.all():
                    self.stderr.write(f"  not taken {refusal.url}: {refusal.reason}")
                self.stdout.write(self.style.SUCCESS(line) if run.status == "done" else self.style.ERROR(line))
                if run.error:
                    self.stderr.write(run.error)
        finally:
            close_vector_store()

    def _configured(self, slug, tenant) -> SiteSource:
        if not settings.RAG_CRAWL_START_URLS:
            raise CommandError("RAG_CRAWL_START_URLS is not set.")
        if not slug:
            raise CommandError("Name the tag of the configured site with --tag.")
        tag = Tag.objects.filter(tenant_id=tenant, slug=slug).first()
        if tag is None:
            raise CommandError(f"No tag {slug!r} in tenant {tenant!r}.")
        existing = SiteSource.objects.filter(tenant_id=tenant, name=CONFIGURED_NAME).first()
        if existing is not None:  # the environment may have changed: it is the source of truth
            existing.delete() if not existing.documents.exists() and not existing.runs.exists() else None
        if existing is not None and existing.pk is not None:
            existing.tag = tag
            existing.start_urls = [u for u in map(canonical_url, settings.RAG_CRAWL_START_URLS) if u]
            existing.allowed_domains = normalise_domains(settings.RAG_ALLOWLIST_DOMAINS) or existing.allowed_domains
            existing.max_pages = settings.RAG_MAX_PAGES
            existing.save(update_fields=["tag", "start_urls", "allowed_domains", "max_pages"])
            return existing
        try:
            return sites.site_create(
                user=admins_of(tenant_id=tenant).order_by("pk").first(),
                name=CONFIGURED_NAME,
                tag=tag,
                start_urls=settings.RAG_CRAWL_START_URLS,
                allowed_domains=settings.RAG_ALLOWLIST_DOMAINS,
                max_pages=settings.RAG_MAX_PAGES,
                check_permissions=False,
            )
        except sites.SiteRefused as e:
            raise CommandError(str(e)) from e
