"""A real HTTP server (http.server, threads) serving a small help site with every trap the crawler
must handle: URL variants of one page, redirects, rel=canonical, tracking parameters, a robots.txt
disallow, off-domain links, a 404, a slow page, a non-HTML file, a redirect loop and a huge page.

`site.pages` maps a path to (content type, body) and may be changed between crawls; the server
reads it on every request. Listens on 127.0.0.1 only.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

PARAGRAPH = (
    "Brightwater Tools employees get twenty-five days of paid leave per year. Requests go through "
    "the HR portal two weeks ahead, and a manager approves them within three working days."
)


def html_page(title: str, body: str, *, links: list[str] = (), head: str = "") -> str:
    anchors = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    return (
        f"<!doctype html><html><head><title>{title}</title>{head}</head><body>"
        f"<nav><ul>{anchors}</ul></nav><main><article><h1>{title}</h1><p>{body}</p>"
        f"<p>{PARAGRAPH if 'leave' not in body else ''}</p></article></main>"
        "<footer>Copyright 2026 Brightwater Tools · Imprint · Privacy</footer></body></html>"
    )


class FixtureSite:
    def __init__(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.base = f"http://localhost:{self.port}"
        self.requests: list[str] = []
        self.slow_seconds = 3.0
        self.huge_bytes = 600_000
        self.pages: dict[str, tuple[str, bytes]] = {}
        self.redirects: dict[str, str] = {
            "/old-about": "/about?b=2&a=1",
            "/loop-a": "/loop-b",
            "/loop-b": "/loop-a",
            "/away": "http://example.org/elsewhere",
        }
        self.reset_pages()

    def reset_pages(self) -> None:
        links = [
            "/docs/",
            "/docs/index.html",
            "/docs?utm_source=newsletter&utm_medium=email",
            "/docs/#vacation",
            f"http://LOCALHOST:{self.port}/docs",
            "/about?b=2&a=1",
            "/about?a=1&b=2&fbclid=xyz",
            "/old-about",
            "/alias",
            "/expenses",
            "/private/salaries",
            "http://example.org/offsite-page",
            "https://other.example.com/",
            "/missing",
            "/slow",
            "/handbook.pdf",
            "/loop-a",
            "/huge",
            "/away",
            "mailto:hr@example.com",
        ]
        self.set_html("/", "Help centre", "Welcome to the Brightwater help centre. Find policies below.", links=links)
        self.set_html("/docs", "Leave policy", PARAGRAPH, links=["/", "/expenses"])
        self.set_html(
            "/about",
            "About Brightwater",
            "Brightwater Tools makes hand tools in Leeds since 1962. The company employs 240 people.",
        )
        self.set_html(
            "/alias",
            "About Brightwater (print view)",
            "This print view repeats the about page.",
            head='<link rel="canonical" href="/about?a=1&amp;b=2">',
        )
        self.set_html(
            "/expenses",
            "Travel expenses",
            "Travel expenses are refunded within 30 days. Hotel nights cost at most 140 euros in Europe.",
        )
        self.set_html("/private/salaries", "Salaries", "Confidential salary bands that robots.txt keeps out.")
        self.pages["/robots.txt"] = ("text/plain", b"User-agent: *\nDisallow: /private/\n")
        self.pages["/handbook.pdf"] = ("application/pdf", b"%PDF-1.4\n% not a page\n")

    def set_html(self, path: str, title: str, body: str, **kwargs) -> None:
        self.pages[path] = ("text/html; charset=utf-8", html_page(title, body, **kwargs).encode())

    def url(self, path: str) -> str:
        return self.base + path

    def _handler(self):
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                path = urlsplit(self.path).path
                site.requests.append(self.path)
                if path in site.redirects:
                    self.send_response(301)
                    self.send_header("Location", site.redirects[path])
                    self.end_headers()
                    return
                if path == "/slow":
                    time.sleep(site.slow_seconds)
                    return self._send("text/html", html_page("Slow", "Too late.").encode())
                if path == "/huge":  # no Content-Length: the crawler must cut it off while reading
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.end_headers()
                    chunk = b"<p>" + b"lorem ipsum " * 800 + b"</p>"
                    sent = 0
                    try:
                        while sent < site.huge_bytes:
                            self.wfile.write(chunk)
                            sent += len(chunk)
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                    return
                key = path.rstrip("/") or "/"
                if key == "/docs/index.html":
                    key = "/docs"
                found = site.pages.get(key) or site.pages.get(path)
                if found is None:
                    return self._send("text/html", b"<h1>Not found</h1>", status=404)
                self._send(*found)

            def _send(self, content_type: str, body: bytes, status: int = 200):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler

    def start(self) -> FixtureSite:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
