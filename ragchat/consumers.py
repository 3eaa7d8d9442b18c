"""What the project's listen-only websockets share (documents list, inbox): they send HTML fragments
with hx-swap-oob, as the chat does, for htmx's ws extension on the page."""

from __future__ import annotations

from channels.generic.websocket import AsyncWebsocketConsumer


class UserGroupConsumer(AsyncWebsocketConsumer):
    """A page that only listens: a signed-in, active user joins the one group `group_for(user)`
    names (the client cannot choose another; frames it sends are ignored). Anonymous or inactive
    users are refused before accept(), so the handshake itself fails."""

    def group_for(self, user) -> str:
        raise NotImplementedError

    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated or not user.is_active:
            await self.close(code=4401)
            return
        self.user = user
        self.group = self.group_for(user)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        pass
