"""Fetching one URL for the crawler, refusing what must not be fetched, with a reason for each.

- SSRF: the host's addresses are resolved before every request (and every redirect hop); any
  address that is not globally routable (loopback, private, link-local, carrier-grade NAT, reserved,
  multicast, IPv4-mapped forms of those) refuses the URL unless `allow_private` is set.
- Only http(s), only allowlisted hosts (A4), also after a redirect.
- Redirects are followed by hand, at most `max_redirects`; a chain that comes back to a URL it
  already visited is a redirect loop.
- Size: a declared Content-Length over `max_bytes` is refused before the body is read; a body that
  grows past it is cut off and refused. Time: the whole fetch (all hops and the body) has
  `timeout` seconds.

httpx resolves the host again when it connects; the address the connection really reached is
checked again before anything of the answer is read (`_check_peer`), so a DNS answer that changes
in between (rebinding) gets nothing back. The GET itself was sent by then: an egress firewall is
still the defence against internal endpoints that act on a GET.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

import httpx

DEFAULT_MAX_BYTES = 5 * 1024 * 1024
DEFAULT_USER_AGENT = "ragchat-crawler/1.0 (+site import; respects robots.txt)"
REDIRECT_CODES = {301, 302, 303, 307, 308}


class FetchRefused(Exception):
    """A URL was not fetched, or its answer not used; `reason` is written for the source's owner."""

    def __init__(self, url: str, reason: str, *, status: int | None = None, transient: bool = False) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason
        self.status = status
        # A failure that may pass (timeout, 5xx, unreachable): the page is kept, not treated as gone.
        self.transient = transient


@dataclass(frozen=True)
class FetchPolicy:
    allow_private: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    timeout: float = 20.0
    max_redirects: int = 5
    user_agent: str = DEFAULT_USER_AGENT


@dataclass(frozen=True)
class FetchResult:
    requested_url: str
    url: str  # after redirects
    status: int
    content_type: str
    body: bytes
    redirects: tuple[str, ...] = field(default=())

    @property
    def text(self) -> str:
        charset = "utf-8"
        for part in self.content_type.split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.lower() == "charset" and value:
                charset = value.strip("\"'")
        try:
            return self.body.decode(charset, errors="replace")
        except LookupError:
            return self.body.decode("utf-8", errors="replace")


async def resolve_addresses(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({info[4][0] for info in infos})


def lookup_failure(host: str, error: BaseException) -> str:
    """Why `host` could not be looked up, as a sentence for the source's owner (the resolver's own
    words, "[Errno -2] Name or service not known", say nothing to them)."""
    if isinstance(error, UnicodeError):
        return f"“{host}” is not a valid host name"
    code = getattr(error, "errno", None)
    if code in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)):
        return f"no server called {host} was found: check the address"
    if code == socket.EAI_AGAIN:
        return f"the name {host} could not be looked up just now (no answer from the name server)"
    return f"the name {host} could not be looked up"


def connection_failure(error: BaseException) -> str:
    """Why a request got no usable answer, as a sentence for the source's owner (not the network
    library's exception and errno)."""
    causes: list[BaseException] = []
    cause: BaseException | None = error
    while cause is not None and cause not in causes:
        causes.append(cause)
        cause = cause.__cause__ or cause.__context__
    text = " ".join(str(c) for c in causes).lower()
    if any(isinstance(c, httpx.TimeoutException | TimeoutError) for c in causes):
        return "the server did not answer in time"
    if any(isinstance(c, ssl.SSLError) for c in causes) or "certificate" in text or "ssl" in text:
        return "the server's HTTPS certificate could not be verified"
    if any(isinstance(c, ConnectionRefusedError) for c in causes) or "connection refused" in text:
        return "the server refused the connection"
    if any(isinstance(c, socket.gaierror) for c in causes) or "name or service" in text:
        return "the server's name could not be looked up"
    if "unreachable" in text:
        return "the network could not reach the server"
    if isinstance(error, httpx.ConnectError):
        return "no connection could be made to the server"
    if isinstance(error, httpx.RemoteProtocolError | httpx.ReadError) or "reset" in text:
        return "the server closed the connection before its answer was complete"
    if isinstance(error, httpx.DecodingError):
        return "the server's answer could not be decoded"
    return "the connection to the server failed"


def address_refusal(address: str) -> str | None:
    """Why an address may not be fetched from (None: it is a public, globally routable one)."""
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return f"{address} is not an IP address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return f"{ip} is a loopback address"
    if ip.is_link_local:
        return f"{ip} is a link-local address"
    if ip.is_private:
        return f"{ip} is a private address"
    if ip.is_multicast or ip.is_reserved or ip.is_unspecified or not ip.is_global:
        return f"{ip} is not a public address"
    return None


async def check_target(url: str, *, policy: FetchPolicy) -> None:
    """Refuse a URL whose host resolves to a non-public address (unless the policy allows them)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = await resolve_addresses(host, port)
    except (OSError, UnicodeError) as e:
        raise FetchRefused(url, lookup_failure(host, e), transient=True) from e
    if not addresses:
        raise FetchRefused(url, f"the host {host} has no address", transient=True)
    if policy.allow_private:
        return
    for address in addresses:
        problem = address_refusal(address)
        if problem:
            raise FetchRefused(
                url, f"refused for safety: {host} resolves to {problem} (internal addresses are not fetched)"
            )


async def fetch(
    client: httpx.AsyncClient,
    url: str,
    *,
    policy: FetchPolicy,
    allowed: Callable[[str], bool],
    accept: tuple[str, ...] = ("text/html", "application/xhtml+xml"),
) -> FetchResult:
    """GET `url`, following redirects by hand within the allowlist; raise FetchRefused with the reason."""
    try:
        async with asyncio.timeout(policy.timeout):
            return await _fetch(client, url, policy=policy, allowed=allowed, accept=accept)
    except TimeoutError as e:
        raise FetchRefused(url, f"no complete answer within {policy.timeout:g} s", transient=True) from e


async def _fetch(client, url, *, policy, allowed, accept) -> FetchResult:
    chain: list[str] = []
    current = url
    while True:
        parts = urlsplit(current)
        if parts.scheme not in ("http", "https"):
            raise FetchRefused(current, f"not an http(s) URL ({parts.scheme or 'no scheme'})")
        if not allowed(current):
            where = f" (redirected from {url})" if chain else ""
            raise FetchRefused(current, f"the host {parts.hostname} is not in the allowlist{where}")
        if current in chain:
            raise FetchRefused(url, f"redirect loop: {' -> '.join([*chain, current])}")
        chain.append(current)
        await check_target(current, policy=policy)
        try:
            async with client.stream(
                "GET", current, headers={"User-Agent": policy.user_agent}, follow_redirects=False
            ) as response:
                _check_peer(current, response, policy=policy)
                if response.status_code in REDIRECT_CODES:
                    location = response.headers.get("location")
                    if not location:
                        raise FetchRefused(current, f"redirect ({response.status_code}) without a Location")
                    if len(chain) > policy.max_redirects:
                        raise FetchRefused(url, f"more than {policy.max_redirects} redirects")
                    current = urljoin(current, location)
                    continue
                status = response.status_code
                content_type = response.headers.get("content-type", "").lower()
                if status >= 400:
                    raise FetchRefused(current, f"the server answered {status}", status=status, transient=status >= 500)
                mime = content_type.split(";")[0].strip()
                if accept and mime not in accept:
                    raise FetchRefused(current, f"not an HTML page ({mime or 'no content type'})", status=status)
                declared = response.headers.get("content-length")
                if declared and declared.isdigit() and int(declared) > policy.max_bytes:
                    raise FetchRefused(current, _too_large(int(declared), policy.max_bytes), status=status)
                body = bytearray()
                async for piece in response.aiter_bytes():
                    body.extend(piece)
                    if len(body) > policy.max_bytes:
                        raise FetchRefused(current, _too_large(None, policy.max_bytes), status=status)
                return FetchResult(
                    requested_url=url,
                    url=current,
                    status=status,
                    content_type=content_type,
                    body=bytes(body),
                    redirects=tuple(chain[:-1]),
                )
        except httpx.HTTPError as e:
            raise FetchRefused(current, connection_failure(e), transient=True) from e


def _check_peer(url: str, response: httpx.Response, *, policy: FetchPolicy) -> None:
    """The address the connection actually reached must pass the same rule: a DNS answer that
    changed between the check and the connection (rebinding) gets its response refused unread."""
    if policy.allow_private:
        return
    stream = response.extensions.get("network_stream")
    peer = stream.get_extra_info("server_addr") if stream is not None else None
    if not peer:
        return
    problem = address_refusal(str(peer[0]))
    if problem:
        raise FetchRefused(url, f"refused for safety: the connection reached {problem}")


def _too_large(size: int | None, limit: int) -> str:
    if size is None:
        return f"the page is larger than the {_size(limit)} limit"
    return f"the page is {_size(size)}; the limit is {_size(limit)}"


def _size(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB" if n >= 1024 * 1024 else f"{max(1, round(n / 1024))} KB"
