"""Live document rows: ingestion pushes "document.changed" to the tenant's group; each connected page
gets the row re-rendered for its own user (access re-checked per event), or a removal."""
from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.http import Http404

from documents.models import Document
from documents.services import progress_group


class DocumentProgressConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated or not user.is_active:
            await self.close(code=4401)  # refused before accept(): the handshake fails
            return
        self.user = user
        self.group = progress_group(user.tenant_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content, **kwargs):
        pass  # the page only listens

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
