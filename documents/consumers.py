"""Live document rows: ingestion pushes "document.changed" to the tenant's group; each connected page
gets the row re-rendered for its own user (access re-checked per event), or its removal.

Frames out (htmx ws extension, as every live page): the row as an out-of-band fragment (replaced in
place, or inserted at the top when the page does not show it yet), then the reader's document count.
"""

from __future__ import annotations

import uuid

from channels.db import database_sync_to_async
from django.http import Http404

from documents.models import Document
from documents.services import progress_group
from ragchat.consumers import UserGroupConsumer
from ragchat.partials import render_partial


class DocumentProgressConsumer(UserGroupConsumer):
    def group_for(self, user) -> str:
        return progress_group(user.tenant_id)

    async def document_changed(self, event):
        # A table row and the count cannot share a frame: HTML parses a <tr> only among table parts.
        for frame in await self._frames(str(event.get("document_id", ""))):
            await self.send(text_data=frame)

    async def site_changed(self, event):
        # Only pages that show site progress ask for it (ws-connect="/ws/documents/?sites=1"): an
        # out-of-band fragment without its target on the page would be an error there.
        if b"sites=1" not in self.scope.get("query_string", b""):
            return
        frame = await self._site_frame(event.get("site_id"))
        if frame:
            await self.send(text_data=frame)

    @database_sync_to_async
    def _site_frame(self, site_id) -> str | None:
        """The site's progress card, for people who may manage the source (access checked per event)."""
        from access import policy
        from documents.site_views import site_context

        try:
            self.user.refresh_from_db(fields=["is_active", "is_superuser", "tenant_id"])
        except type(self.user).DoesNotExist:
            return None
        site = policy.manageable_sites(user=self.user).filter(pk=site_id).first() if str(site_id).isdigit() else None
        if site is None:
            return None
        return render_partial("documents/_site_progress.html", {**site_context(site), "live": True})

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
