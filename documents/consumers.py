"""Live document rows: ingestion pushes "document.changed" to the tenant's group; each connected page
gets the row re-rendered for its own user (access re-checked per event), or its removal.

Frames out (htmx ws extension, as every live page): the row as an out-of-band fragment (replaced in
place, or inserted at the top when the page does not show it yet), then the reader's document count.

A page gets only what it shows (an out-of-band fragment without its target on the page is an error
there): the documents list (`/ws/documents/`) the rows and the count; the websites page
(`?sites=1`) every site's progress card; one website's page (`?site=<id>`) that site's card.
"""

from __future__ import annotations

import uuid
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from django.http import Http404

from documents.models import Document
from documents.services import progress_group
from ragchat.consumers import UserGroupConsumer
from ragchat.partials import render_partial


class DocumentProgressConsumer(UserGroupConsumer):
    def group_for(self, user) -> str:
        return progress_group(user.tenant_id)

    def _shown_sites(self) -> str | None:
        """ "all" (the websites page), a site's id (its page), or None (the documents list)."""
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        if query.get("sites") == ["1"]:
            return "all"
        site = query.get("site", [""])[0]
        return site if site.isdigit() else None

    async def connect(self):
        await super().connect()
        shown = self._shown_sites() if getattr(self, "group", None) else None
        if shown is not None:
            # What changed between the page's render and this connection (a crawl that ended in
            # between, a fast failure) would never come: the cards as they stand now, first.
            for frame in await self._site_frames(shown):
                await self.send(text_data=frame)

    async def document_changed(self, event):
        if self._shown_sites() is not None:
            return  # a websites page shows no document rows
        # A table row and the count cannot share a frame: HTML parses a <tr> only among table parts.
        for frame in await self._frames(str(event.get("document_id", ""))):
            await self.send(text_data=frame)

    async def site_changed(self, event):
        shown = self._shown_sites()
        if shown is None or shown not in ("all", str(event.get("site_id"))):
            return
        for frame in await self._site_frames(str(event.get("site_id"))):
            await self.send(text_data=frame)

    @database_sync_to_async
    def _site_frames(self, shown: str) -> list[str]:
        """The progress card of the site `shown` ("all": of every site), for people who may manage
        the source (access checked per event)."""
        from access import policy
        from documents.site_views import site_context

        try:
            self.user.refresh_from_db(fields=["is_active", "is_superuser", "tenant_id"])
        except type(self.user).DoesNotExist:
            return []
        sites = policy.manageable_sites(user=self.user)
        if shown != "all":
            sites = sites.filter(pk=shown) if shown.isdigit() else sites.none()
        return [
            render_partial("documents/_site_progress.html", {**site_context(site), "live": True})
            for site in sites.select_related("tag")
        ]

    @database_sync_to_async
    def _frames(self, document_id: str) -> list[str]:
        from documents.selectors import document_for_user, documents_for_user
        from documents.views import render_row

        try:
            self.user.refresh_from_db(fields=["is_active", "is_superuser", "tenant_id"])
        except type(self.user).DoesNotExist:
            return []  # the account was deleted while the page was open
        try:
            document = document_for_user(user=self.user, document_id=document_id)
        except Http404:
            if _is_uuid(document_id) and Document.objects.filter(pk=document_id).exists():
                return []  # exists but is not theirs: say nothing
            row = render_partial("documents/_row_removed.html", {"document_id": document_id})
        else:
            row = render_row(user=self.user, document=document, live=True)
        total = documents_for_user(user=self.user).count()
        return [row, render_partial("documents/_count.html", {"total": total, "oob": True})]


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
