"""Live document rows: ingestion pushes "document.changed" to the tenant's group; each connected page
gets the row re-rendered for its own user (access re-checked per event), or a removal."""
from __future__ import annotations

from channels.db import database_sync_to_async
from django.http import Http404

from documents.models import Document
from documents.services import progress_group
from ragchat.consumers import UserGroupConsumer


class DocumentProgressConsumer(UserGroupConsumer):
    def group_for(self, user) -> str:
        return progress_group(user.tenant_id)

    async def document_changed(self, event):
        message = await self._row(str(event.get("document_id", "")))
        if message is not None:
            await self.send_json(message)

    @database_sync_to_async
    def _row(self, document_id: str) -> dict | None:
        from documents.selectors import document_for_user
        from documents.views import render_row

        try:
            self.user.refresh_from_db(fields=["is_active", "is_superuser", "tenant_id"])
        except type(self.user).DoesNotExist:
            return None  # the account was deleted while the page was open
        try:
            document = document_for_user(user=self.user, document_id=document_id)
        except Http404:
            if Document.objects.filter(pk=document_id).exists() if _is_uuid(document_id) else False:
                return None  # exists but is not theirs: say nothing
            return {"id": f"doc-{document_id}", "html": "", "status": "deleted"}
        return {
            "id": f"doc-{document.id}",
            "html": render_row(user=self.user, document=document),
            "status": document.status,
            "chunks": document.chunk_count,
        }


def _is_uuid(value: str) -> bool:
    import uuid

    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
