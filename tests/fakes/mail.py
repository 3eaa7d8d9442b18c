"""Mail servers for the tests. Email backends standing in for a slow and a broken mail server: real
Django email backends, set by dotted path as settings.EMAIL_BACKEND (tests) or EMAIL_BACKEND (a
subprocess). And mail servers on a local port that Django's SMTP backend talks to over the network:
a real SMTP server (aiosmtpd) that keeps what it receives, optionally with AUTH and STARTTLS or TLS
from the first byte, and one that hangs (accepts connections and never says a word)."""

from __future__ import annotations

import datetime
import email
import email.message
import ipaddress
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from email import policy
from pathlib import Path

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
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


# ------------------------------------------------------------------------------------- SMTP servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Certificate:
    """A self-signed certificate for 127.0.0.1 and localhost, and its key (PEM files). A client
    trusts it with SSL_CERT_FILE=cert (OpenSSL's default verify paths, which Django's SMTP backend uses)."""

    cert: Path
    key: Path

    @classmethod
    def make(cls, folder: Path) -> Certificate:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        paths = cls(cert=folder / "smtp-cert.pem", key=folder / "smtp-key.pem")
        paths.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        paths.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        return paths

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, self.key)
        return context


@dataclass(frozen=True)
class Received:
    """One email as the mail server took it: the envelope, the message, and how the sender connected."""

    mail_from: str
    rcpt_tos: list[str]
    message: email.message.EmailMessage
    login: str | None  # the account it signed in with (AUTH), None without AUTH
    tls: bool  # the connection was encrypted (STARTTLS or TLS from the first byte)


class SmtpServer:
    """A real SMTP server (aiosmtpd) on 127.0.0.1, in a thread of its own, that keeps every email it
    receives in `received`. With `accounts` (login: password) it offers AUTH and takes no email
    from a sender that has not signed in; with `starttls` it offers STARTTLS and requires it before
    anything else; with `implicit_tls` the connection is TLS from the first byte (SMTPS)."""

    def __init__(
        self,
        *,
        port: int | None = None,
        accounts: dict[str, str] | None = None,
        starttls: Certificate | None = None,
        implicit_tls: Certificate | None = None,
    ) -> None:
        self.port = port or free_port()
        self.accounts = accounts
        self.received: list[Received] = []
        options: dict = {}
        if accounts is not None:
            # With STARTTLS, AUTH only after it (aiosmtpd's default). aiosmtpd does not count TLS
            # from the first byte as TLS for that rule, so there (and without TLS) AUTH is always offered.
            options.update(authenticator=self._authenticate, auth_required=True, auth_require_tls=starttls is not None)
        if starttls is not None:
            options.update(tls_context=starttls.server_context(), require_starttls=True)
        self.controller = Controller(
            self,
            hostname="127.0.0.1",
            port=self.port,
            ssl_context=implicit_tls.server_context() if implicit_tls is not None else None,
            **options,
        )

    def start(self) -> SmtpServer:
        self.controller.start()
        return self

    def stop(self) -> None:
        self.controller.stop()

    def _authenticate(self, server, session, envelope, mechanism, auth_data) -> AuthResult:
        ok = (
            isinstance(auth_data, LoginPassword)
            and self.accounts is not None
            and self.accounts.get(auth_data.login.decode()) == auth_data.password.decode()
        )
        return AuthResult(success=ok, handled=False, auth_data=auth_data)

    async def handle_DATA(self, server, session, envelope) -> str:  # aiosmtpd's handler hook
        login = session.login_data.decode() if session.authenticated and session.login_data else None
        self.received.append(
            Received(
                mail_from=envelope.mail_from,
                rcpt_tos=list(envelope.rcpt_tos),
                message=email.message_from_bytes(envelope.original_content, policy=policy.default),
                login=login,
                tls=server.transport.get_extra_info("ssl_object") is not None,
            )
        )
        return "250 Message accepted for delivery"

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        """The emails received, once there are `count` of them (or `timeout` seconds passed)."""
        deadline = time.monotonic() + timeout
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return list(self.received)


class HungSmtpServer:
    """A mail server that hangs: it accepts every connection on 127.0.0.1 and never says a word, not
    even its greeting. `stop` closes the connections it holds (the sender sees them dropped) and
    frees the port, for a working server to take it over."""

    def __init__(self, *, port: int | None = None) -> None:
        self.listener = socket.create_server(("127.0.0.1", port or 0))
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self.connections: list[socket.socket] = []
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="hung-smtp", daemon=True)

    def start(self) -> HungSmtpServer:
        self._thread.start()
        return self

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                connection, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections.append(connection)  # held open, never read from nor written to

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(5)
        self.listener.close()
        for connection in self.connections:
            connection.close()


def use_smtp(settings, port: int, **more) -> None:
    """Point Django's SMTP backend at a server on 127.0.0.1:`port` (pytest-django's `settings`)."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = port
    for name, value in more.items():
        setattr(settings, name, value)
