"""Email backends standing in for a slow and a broken mail server: real Django email backends, set
by dotted path as settings.EMAIL_BACKEND (tests) or EMAIL_BACKEND (a subprocess)."""

from __future__ import annotations

import time

from django.core.mail.backends.base import BaseEmailBackend
from django.core.mail.backends.locmem import EmailBackend as LocmemBackend

SLOW_SECONDS = 1.0


class SlowBackend(LocmemBackend):
    """A mail server that takes SLOW_SECONDS per delivery; then the email is in django.core.mail.outbox."""

    def send_messages(self, messages):
        time.sleep(SLOW_SECONDS)
        return super().send_messages(messages)


class BrokenBackend(BaseEmailBackend):
    """A mail server that refuses every connection."""

    def send_messages(self, messages):
        raise ConnectionRefusedError("mail server down")
