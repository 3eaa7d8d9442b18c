"""Emails off the database thread (ragchat.mail): from sync code that a running loop runs in a
worker thread an email is queued to the mail thread and the caller goes on; the mail thread sends
in order; where no loop runs the email is sent before the call returns; a failure is handed to the
caller's handler, never raised; what is queued when the process ends is sent first.

And through a real mail server (tests/fakes/mail.py: aiosmtpd on a local port): the SMTP settings
from the environment (server, port, account, STARTTLS or TLS, sender) take a notification email
there; a mail server that accepts and never answers fails the send after EMAIL_TIMEOUT (logged), and
the next email goes out once the server works."""

from __future__ import annotations

import logging
import os
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
from routing.notifications import send_email
from tests.fakes.mail import SLOW_SECONDS, Certificate, SmtpServer, use_smtp

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


# ------------------------------------------------------------------------------------- SMTP

SMTP_VARIABLES = {"EMAIL_BACKEND", "DEFAULT_FROM_EMAIL", "SERVER_EMAIL", "DJANGO_SETTINGS_MODULE"}


def django_process(script: str, *, setup: bool = True, **env: str) -> subprocess.CompletedProcess:
    """Run `script` in a fresh interpreter on ragchat.settings, with this environment in place of
    this process's own email variables (settings are read once, at import)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EMAIL_") and k not in SMTP_VARIABLES}
    code = ("import django\ndjango.setup()\n" if setup else "") + textwrap.dedent(script)
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "ragchat.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_email_settings_default_to_the_console_and_refuse_tls_with_ssl():
    shown = "from django.conf import settings as s\nprint(s.EMAIL_BACKEND, s.EMAIL_HOST, s.EMAIL_PORT, s.EMAIL_TIMEOUT)"
    done = django_process(shown, setup=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["django.core.mail.backends.console.EmailBackend", "localhost", "25", "10.0"]
    done = django_process(shown, setup=False, EMAIL_TIMEOUT="2.5")
    assert done.stdout.split()[-1] == "2.5"

    both = django_process("", EMAIL_USE_TLS="true", EMAIL_USE_SSL="true")
    assert both.returncode != 0
    assert "ImproperlyConfigured: EMAIL_USE_TLS and EMAIL_USE_SSL are both true: set one" in both.stderr
    zero = django_process("", EMAIL_TIMEOUT="0")
    assert zero.returncode != 0 and "EMAIL_TIMEOUT must be a number of seconds above 0, not 0" in zero.stderr


NOTIFY = """
from django.conf import settings
from routing.notifications import send_email

send_email(subject="New question: parking", body="Someone asked about parking permits.", to=["olivia@example.com"])
print("timeout", settings.EMAIL_TIMEOUT)
"""


# aiosmtpd does not count TLS from the first byte as TLS when it offers AUTH (tests/fakes/mail.py), and says so.
@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning")
@pytest.mark.parametrize("transport", ["EMAIL_USE_TLS", "EMAIL_USE_SSL"])
def test_the_smtp_settings_in_the_environment_take_a_notification_to_the_mail_server(transport, tmp_path):
    """EMAIL_BACKEND, EMAIL_HOST, EMAIL_PORT, the account, STARTTLS (EMAIL_USE_TLS) or TLS from the
    first byte (EMAIL_USE_SSL) and DEFAULT_FROM_EMAIL, all from the environment: a notification
    (routing.notifications.send_email, what a tag owner gets for a routed question) reaches a real
    mail server, encrypted and signed in, from and to the right addresses. A wrong password is
    refused by the server, and the failure logged, not raised."""
    certificate = Certificate.make(tmp_path)
    tls = {"starttls": certificate} if transport == "EMAIL_USE_TLS" else {"implicit_tls": certificate}
    server = SmtpServer(accounts={"ragchat-mailer": "app-password-1"}, **tls).start()
    env = {
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(server.port),
        "EMAIL_HOST_USER": "ragchat-mailer",
        "EMAIL_HOST_PASSWORD": "app-password-1",
        transport: "true",
        "DEFAULT_FROM_EMAIL": "ragchat@chat.example.com",
        "SSL_CERT_FILE": str(certificate.cert),  # the client trusts the server's self-signed certificate
    }
    try:
        done = django_process(NOTIFY, **env)
        refused = django_process(NOTIFY, **{**env, "EMAIL_HOST_PASSWORD": "wrong"})
    finally:
        server.stop()

    assert done.returncode == 0, done.stderr
    assert "email failed" not in done.stderr and "timeout 10.0" in done.stdout
    [received] = server.received
    assert received.mail_from == "ragchat@chat.example.com" and received.rcpt_tos == ["olivia@example.com"]
    assert received.message["From"] == "ragchat@chat.example.com" and received.message["To"] == "olivia@example.com"
    assert received.message["Subject"] == "New question: parking"
    assert received.message.get_content().strip() == "Someone asked about parking permits."
    assert received.login == "ragchat-mailer" and received.tls

    assert refused.returncode == 0, refused.stderr
    assert "routing: email failed: (535" in refused.stderr and '"event": "routing_email_failed"' in refused.stderr
    assert len(server.received) == 1


async def test_a_hung_mail_server_fails_the_send_after_email_timeout_and_the_next_email_goes_out(
    settings, caplog, hung_smtp_server
):
    """A mail server that accepts the connection and never answers: the queued send fails after
    EMAIL_TIMEOUT, logged as every failed notification is, and the mail thread goes on; once the
    server works (on the same port), the next email reaches it."""
    use_smtp(settings, hung_smtp_server.port, EMAIL_TIMEOUT=1)
    with caplog.at_level(logging.ERROR, logger="routing.notifications"):
        started = time.monotonic()
        await database_sync_to_async(send_email)(subject="first", body="body", to=["olivia@example.com"])
        assert time.monotonic() - started < 0.5  # queued: the caller went on
        assert mail.wait_sent(10)
        failed_after = time.monotonic() - started
    assert 0.9 < failed_after < 5
    assert hung_smtp_server.connections  # it did connect, and waited for a greeting that never came
    [record] = [r for r in caplog.records if r.name == "routing.notifications"]
    assert record.getMessage().startswith("routing: email failed: ") and record.getMessage().endswith("timed out")
    assert record.levelno == logging.ERROR and record.event == "routing_email_failed"

    hung_smtp_server.stop()
    server = SmtpServer(port=hung_smtp_server.port).start()  # the mail server works again
    try:
        await database_sync_to_async(send_email)(subject="second", body="body", to=["olivia@example.com"])
        assert mail.wait_sent(10)
    finally:
        server.stop()
    [received] = server.received
    assert received.message["Subject"] == "second" and received.rcpt_tos == ["olivia@example.com"]
    assert received.mail_from == settings.DEFAULT_FROM_EMAIL
    assert len([r for r in caplog.records if r.name == "routing.notifications"]) == 1


async def test_without_a_timeout_a_hung_mail_server_holds_the_mail_thread(settings, hung_smtp_server):
    """Why EMAIL_TIMEOUT has a default: without one (Django's own default) the send waits for the
    greeting as long as the server holds the connection, and every email queued behind it waits too."""
    use_smtp(settings, hung_smtp_server.port, EMAIL_TIMEOUT=None)
    await database_sync_to_async(send_email)(subject="first", body="body", to=["olivia@example.com"])
    assert not mail.wait_sent(3)  # still waiting
    hung_smtp_server.stop()  # the server drops the connection: the send fails and the thread is free
    assert mail.wait_sent(5)
