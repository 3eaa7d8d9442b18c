"""The single-process channel layer: channels' in-memory layer with its expiry sweep throttled.

channels.layers.InMemoryChannelLayer sweeps every channel and every group for expired entries on
each group_send() and each receive(): with hundreds of open chats that is a pass over hundreds of
entries per streamed frame, per tab (about an eighth of the event loop at 200 streams). Messages
expire after 60 s and group memberships after a day, so sweeping once a second changes nothing
but the cost. Several processes use Redis (settings.REDIS_URL) and never load this.
"""

from __future__ import annotations

import time

from channels.layers import InMemoryChannelLayer

CLEAN_EVERY_SECONDS = 1.0


class ThrottledInMemoryChannelLayer(InMemoryChannelLayer):
    _last_clean = 0.0

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now - self._last_clean < CLEAN_EVERY_SECONDS:
            return
        self._last_clean = now
        super()._clean_expired()
