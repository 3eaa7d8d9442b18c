"""The crawler: breadth-first from the start URLs, inside the allowlist only, one page per
canonical URL (A5), robots.txt respected (Protego), a polite delay per host, every refusal reported
with its reason.

The caller receives each page (`on_page`, awaited) and each refusal (`on_refusal`) as they come and
decides what to store; `cancelled()` is checked between requests. Pages are fetched one at a time:
politeness matters more than speed for an intranet or a help site.

A URL met as a redirect source, an alias, or a page that names another URL as rel=canonical is
mapped to the canonical URL of the page it leads to, so every spelling of one page is fetched once
and stored once.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

import httpx
from protego import Protego

from ragchat.services.web.extract import extract_page
from ragchat.services.web.fetch import FetchPolicy, FetchRefused, fetch
from ragchat.services.web.urls import canonical_url, host_allowed, path_selected

MAX_CRAWL_DELAY = 10.0


@dataclass(frozen=True)
class CrawlConfig:
    start_urls: Sequence[str]
    allowed_domains: Sequence[str]
    max_pages: int = 100
    max_depth: int = 3
    include: Sequence[str] = ()
    exclude: Sequence[str] = ()
    delay: float = 1.0  # seconds between two requests to one host (robots.txt Crawl-delay may raise it)
    fetch: FetchPolicy = field(default_factory=FetchPolicy)


@dataclass(frozen=True)
class Page:
    url: str  # the canonical URL: the page's one id (A5)
    fetched_url: str  # where its body came from (after redirects)
    title: str
    text: str  # Markdown of the main text
    content_hash: str  # SHA-256 of `text`: unchanged text, unchanged page
    depth: int
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Refusal:
    url: str
    reason: str
    # "gone" (404/410: the page no longer exists), "transient" (may pass: keep what we have),
    # "refused" (robots, allowlist, SSRF, size, type, loop: deliberately not taken)
    kind: str = "refused"
    key: str = ""  # the canonical URL the refusal is about ("" when there is none)


@dataclass
class CrawlStats:
    pages: int = 0
    refused: int = 0
    duplicates: int = 0  # URLs that turned out to be another spelling of a page already taken
    requests: int = 0
    seconds: float = 0.0
    truncated: bool = False  # stopped at max_pages with links left to follow
    transient_failures: int = 0
    seen: set[str] = field(default_factory=set)  # canonical URLs of the pages taken
    gone: set[str] = field(default_factory=set)  # canonical URLs answered 404/410
    refused_urls: set[str] = field(default_factory=set)  # canonical URLs deliberately not taken

    @property
    def complete(self) -> bool:
        """Every reachable page was visited without a passing failure: what was not met is gone."""
        return not self.truncated and not self.transient_failures

    @property
    def pages_per_second(self) -> float:
        return self.pages / self.seconds if self.seconds else 0.0


OnPage = Callable[[Page], "Awaitable[None] | None"]
OnRefusal = Callable[[Refusal], "Awaitable[None] | None"]


class Crawler:
    def __init__(self, config: CrawlConfig, *, client: httpx.AsyncClient | None = None) -> None:
        self.config = config
        self._client = client
        self._robots: dict[str, Protego | str] = {}  # origin -> rules, or why they could not be read
        self._last_request: dict[str, float] = {}
        self._delay: dict[str, float] = {}

    def allowed(self, url: str) -> bool:
        return host_allowed(url, self.config.allowed_domains)

    async def run(
        self,
        *,
        on_page: OnPage,
        on_refusal: OnRefusal,
        cancelled: Callable[[], bool] | None = None,
    ) -> CrawlStats:
        stats = CrawlStats()
        started = time.perf_counter()
        owns_client = self._client is None
        client = self._client or httpx.AsyncClient(timeout=httpx.Timeout(self.config.fetch.timeout))
        try:
            await self._crawl(client, stats, on_page=on_page, on_refusal=on_refusal, cancelled=cancelled)
        finally:
            if owns_client:
                await client.aclose()
            stats.seconds = time.perf_counter() - started
        return stats

    async def _crawl(self, client, stats: CrawlStats, *, on_page, on_refusal, cancelled) -> None:
        config = self.config
        queue: deque[tuple[str, int]] = deque()
        queued: set[str] = set()
        taken: dict[str, str] = {}  # any canonical spelling met -> the canonical URL of its page

        async def refuse(url: str, reason: str, kind: str = "refused", key: str | None = None) -> None:
            stats.refused += 1
            key = key or canonical_url(url) or ""
            if kind == "gone":
                stats.gone.add(key)
            elif kind == "transient":
                stats.transient_failures += 1
            else:
                stats.refused_urls.add(key)
            await _maybe_await(on_refusal(Refusal(url=url, reason=reason, kind=kind, key=key)))

        for raw in config.start_urls:
            url = canonical_url(raw)
            if url is None:
                await refuse(raw, "not an http(s) URL")
            elif not self.allowed(url):
                await refuse(url, "the start URL's host is not in the allowlist")
            elif url not in queued:
                queued.add(url)
                queue.append((url, 0))

        while queue:
            if cancelled is not None and cancelled():
                stats.truncated = True
                return
            if stats.pages >= config.max_pages:
                stats.truncated = True
                return
            url, depth = queue.popleft()
            if url in taken:
                stats.duplicates += 1
                continue
            if depth > 0 and not path_selected(url, include=config.include, exclude=config.exclude):
                await refuse(url, "excluded by the source's path patterns")
                continue
            robots_refusal = await self._robots_refusal(client, url)
            if robots_refusal:
                await refuse(url, robots_refusal)
                continue
            await self._wait_turn(url)
            stats.requests += 1
            try:
                result = await fetch(client, url, policy=config.fetch, allowed=self.allowed)
            except FetchRefused as e:
                kind = "gone" if e.status in (404, 410) else "transient" if e.transient else "refused"
                await refuse(url if e.url == url else f"{url} -> {e.url}", e.reason, kind, key=url)
                continue
            final = canonical_url(result.url) or url
            # lxml and trafilatura work in a thread: the crawl shares the server's event loop
            page = await asyncio.to_thread(extract_page, result.text, url=result.url)
            base = urljoin(result.url, page.base) if page.base else result.url
            target = final
            if page.canonical:
                named = canonical_url(page.canonical, base)
                if named and self.allowed(named):
                    target = named
            aliases = {url, final, target}
            if target in taken or (target != url and target in stats.seen):
                for alias in aliases:
                    taken.setdefault(alias, taken.get(target, target))
                stats.duplicates += 1
                continue
            for alias in aliases:
                taken[alias] = target
            if not page.nofollow and depth < config.max_depth:
                for href in page.links:
                    link = canonical_url(href, base)
                    if link is None or link in queued or link in taken:
                        continue
                    if not self.allowed(link):
                        continue  # off-allowlist links are not followed (nor counted: a page has many)
                    queued.add(link)
                    queue.append((link, depth + 1))
            if page.noindex:
                await refuse(target, "the page asks not to be indexed (robots noindex)")
                continue
            if not page.text.strip():
                await refuse(target, "no main text was found on the page")
                continue
            stats.pages += 1
            stats.seen.add(target)
            await _maybe_await(
                on_page(
                    Page(
                        url=target,
                        fetched_url=result.url,
                        title=page.title or target,
                        text=page.text,
                        content_hash=hashlib.sha256(page.text.encode("utf-8")).hexdigest(),
                        depth=depth,
                        aliases=tuple(sorted(a for a in aliases if a != target)),
                    )
                )
            )

    async def _robots_refusal(self, client, url: str) -> str | None:
        """Why robots.txt keeps the crawler from `url` (None: it may fetch it)."""
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        if origin not in self._robots:
            self._robots[origin] = await self._load_robots(client, origin)
        robots = self._robots[origin]
        if isinstance(robots, str):
            return robots
        if not robots.can_fetch(url, self.config.fetch.user_agent):
            return "disallowed by robots.txt"
        return None

    async def _load_robots(self, client, origin: str) -> Protego | str:
        await self._wait_turn(origin + "/")
        try:
            result = await fetch(
                client, origin + "/robots.txt", policy=self.config.fetch, allowed=self.allowed, accept=()
            )
        except FetchRefused as e:
            if e.status is not None and 400 <= e.status < 500:
                return Protego.parse("")  # no robots.txt: everything is allowed
            if e.transient:  # RFC 9309: robots.txt unreachable (5xx, network) means stay out for now
                return f"robots.txt could not be read ({e.reason}), so the site is not crawled now"
            return e.reason  # the host itself is refused (SSRF guard, allowlist)
        robots = Protego.parse(result.text)
        crawl_delay = robots.crawl_delay(self.config.fetch.user_agent)
        if crawl_delay:
            self._delay[urlsplit(origin).netloc] = min(float(crawl_delay), MAX_CRAWL_DELAY)
        return robots

    async def _wait_turn(self, url: str) -> None:
        host = urlsplit(url).netloc
        delay = max(self.config.delay, self._delay.get(host, 0.0))
        last = self._last_request.get(host)
        now = time.monotonic()
        if last is not None and now - last < delay:
            await asyncio.sleep(delay - (now - last))
        self._last_request[host] = time.monotonic()


async def _maybe_await(value) -> None:
    if inspect.isawaitable(value):
        await value
