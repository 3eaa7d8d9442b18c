"""`ws/inbox/`: an owner's open inbox page. Auth is checked before accept(); the page joins only its
own user's group (the client cannot choose another: frames it sends are ignored), and each event is
re-checked against the user's inbox before anything is sent.

Frames out (JSON): {"op": "upsert", "id": row id, "html": row, "open": count} or {"op": "remove", ...}.
"""
from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.http import Http404

from routing import selectors
from routing.services import user_group_name


def row_id(question) -> str:
    return f"inbox-g{question.group_id}" if question.group_id else f"inbox-q{question.pk}"


class InboxConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated or not user.is_active:
            await self.close(code=4401)
            return
        self.user = user
        self.group = user_group_name(user.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content, **kwargs):
        pass  # the page only listens; nothing a client sends changes what it receives

    async def inbox_question(self, event):
        frame = await self._frame(event.get("question_id"))
        if frame is not None:
            await self.send_json(frame)

    @database_sync_to_async
    def _frame(self, question_id) -> dict | None:
        from routing.views import render_inbox_row

        self.user.refresh_from_db(fields=["is_active", "is_superuser", "is_staff", "tenant_id"])
        try:
            question = selectors.question_for_user(user=self.user, question_id=question_id)
        except Http404:
            return None  # not theirs (or gone): say nothing
        open_count = selectors.inbox_open_count(user=self.user)
        rows = [r for r in selectors.inbox_rows(user=self.user) if row_id(r.question) == row_id(question)]
        if not rows:
            return {"op": "remove", "id": row_id(question), "open": open_count}
        return {"op": "upsert", "id": row_id(question), "html": render_inbox_row(row=rows[0]), "open": open_count}
