"""Emails off the database thread (ragchat.mail): from sync code that a running loop runs in a
worker thread an email is queued to the mail thread and the caller goes on; the mail thread sends
in order; where no loop runs the email is sent before the call returns; a failure is handed to the
caller's handler, never raised; what is queued when the process ends is sent first."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from channels.db import database_sync_to_async
from django.core.mail import EmailMessage
from django.core.mail.backends.locmem import EmailBackend as LocmemBackend

from ragchat import mail
from tests.fakes.mail import SLOW_SECONDS

ROOT = Path(__file__).resolve().parent.parent
# database_sync_to_async checks the database thread's connection (left open by earlier tests) first.
pytestmark = pytest.mark.django_db


def message(subject: str) -> EmailMessage:
    return EmailMessage(subject, "body", "ragchat@localhost", ["a@example.com"])


def unexpected(error: Exception) -> None:
    raise AssertionError(f"the send failed: {error}")


async def test_from_the_database_thread_the_email_is_queued_and_the_thread_goes_on(settings, mailoutbox):
    settings.EMAIL_BACKEND = "tests.fakes.mail.SlowBackend"
    started = time.monotonic()
    await database_sync_to_async(mail.send)(message("one"), failed=unexpected)
    await database_sync_to_async(lambda: None)()  # other database work is not held
    assert time.monotonic() - started < SLOW_SECONDS / 2
    assert mailoutbox == []  # still being sent
    assert mail.wait_sent(5 * SLOW_SECONDS)
    assert [m.subject for m in mailoutbox] == ["one"]


class FirstSlowest(LocmemBackend):
    """Email "n0" takes longest to send, "n4" least: sent side by side, they would arrive reversed."""

    def send_messages(self, messages):
        time.sleep(0.05 * (5 - int(messages[0].subject[1:])))
        return super().send_messages(messages)


async def test_queued_emails_are_sent_in_the_order_they_were_queued(settings, mailoutbox):
    settings.EMAIL_BACKEND = "tests.test_mail.FirstSlowest"

    def service() -> None:
        for n in range(5):
            mail.send(message(f"n{n}"), failed=unexpected)

    await database_sync_to_async(service)()
    assert mail.wait_sent()
    assert [m.subject for m in mailoutbox] == [f"n{n}" for n in range(5)]


def test_without_a_running_loop_the_email_is_sent_before_the_call_returns(settings, mailoutbox):
    settings.EMAIL_BACKEND = "tests.fakes.mail.SlowBackend"
    mail.send(message("now"), failed=unexpected)
    assert [m.subject for m in mailoutbox] == ["now"]


async def test_a_failed_send_goes_to_the_handler_and_is_not_raised(settings):
    settings.EMAIL_BACKEND = "tests.fakes.mail.BrokenBackend"
    errors: list[Exception] = []
    await database_sync_to_async(mail.send)(message("queued"), failed=errors.append)
    assert mail.wait_sent()
    mail.send(message("inline"), failed=errors.append)
    settings.EMAIL_BACKEND = "no.such.Backend"
    mail.send(message("misconfigured"), failed=errors.append)
    assert [type(e) for e in errors] == [ConnectionRefusedError, ConnectionRefusedError, ModuleNotFoundError]


def test_what_is_queued_when_the_process_ends_is_sent_first():
    script = textwrap.dedent(
        """
        import asyncio, atexit

        import django
        from django.conf import settings

        settings.configure(EMAIL_BACKEND="tests.fakes.mail.SlowBackend")
        django.setup()
        from asgiref.sync import sync_to_async
        from django.core import mail as outbox
        from django.core.mail import EmailMessage

        from ragchat import mail

        outbox.outbox = []
        atexit.register(lambda: print("at exit", [m.subject for m in outbox.outbox], flush=True))


        def handler():
            for n in range(2):
                mail.send(EmailMessage(f"n{n}", "body", "x@localhost", ["a@example.com"]), failed=print)


        async def main():
            await sync_to_async(handler)()
            print("returned", [m.subject for m in outbox.outbox], flush=True)


        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=30 + 4 * SLOW_SECONDS
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["returned []", "at exit ['n0', 'n1']"]
