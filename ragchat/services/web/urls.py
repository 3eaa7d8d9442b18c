"""Canonical URLs (axiom A5) and the domain allowlist (axiom A4).

A5: scheme and host case, default ports, trailing slashes, `index.html`, fragments, tracking
parameters and the order of query parameters all collapse to one id. courlan does the
normalisation (lower case, default ports, tracking parameters, sorted query); this module adds what
it leaves: the fragment, directory index files and the trailing slash. Redirects and rel=canonical
collapse in the crawler, which maps every URL it met to the canonical one of the page it got.

A4: a host is allowed when it is an allowlisted domain or a subdomain of one.

References: docs/specs/rag-standard-v1.md.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from urllib.parse import urljoin, urlsplit, urlunsplit

from courlan import normalize_url

_INDEX_FILES = ("index.html", "index.htm", "index.php", "default.htm", "default.html", "default.aspx")


def canonical_url(url: str, base: str | None = None) -> str | None:
    """The one id of a page's URL, or None for what is not an http(s) URL with a host."""
    url = (url or "").strip()
    if not url:
        return None
    if base:
        url = urljoin(base, url)
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    try:
        url = normalize_url(urlunsplit(parts._replace(fragment="")))
    except (ValueError, AttributeError):
        return None
    parts = urlsplit(url)
    path = parts.path or "/"
    head, _, last = path.rpartition("/")
    if last.lower() in _INDEX_FILES:
        path = head + "/"
    if len(path) > 1:
        path = path.rstrip("/") or "/"
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def normalise_domains(domains: Iterable[str]) -> list[str]:
    """Allowlist entries as bare lower-case host names ("https://Help.Example.com/x" -> "help.example.com")."""
    found: list[str] = []
    for raw in domains:
        entry = (raw or "").strip().lower()
        if not entry:
            continue
        if "//" in entry:
            entry = urlsplit(entry).hostname or ""
        entry = entry.split("/")[0].split(":")[0].strip(".")
        if entry and entry not in found:
            found.append(entry)
    return found


def host_allowed(url: str, allowed_domains: Sequence[str]) -> bool:
    """A4: the URL's host is an allowlisted domain or one of its subdomains (http or https only)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    host = (parts.hostname or "").lower().rstrip(".")
    if parts.scheme not in ("http", "https") or not host:
        return False
    return any(host == domain or host.endswith("." + domain) for domain in allowed_domains)


def path_selected(url: str, *, include: Sequence[str], exclude: Sequence[str]) -> bool:
    """Include/exclude path patterns (shell-style: `/docs/*`); no include pattern means every path."""
    path = urlsplit(url).path or "/"
    if any(fnmatch.fnmatchcase(path, pattern) for pattern in exclude):
        return False
    return not include or any(fnmatch.fnmatchcase(path, pattern) for pattern in include)


def citation_link(metadata: dict, ceiling: Sequence[str] = ()) -> str | None:
    """A4: the page URL a citation may link to — the chunk's `source_url` when its host is inside the
    allowlist stored with it (and inside `ceiling`, the server's RAG_ALLOWLIST_DOMAINS, when set);
    None otherwise, and the citation then links to the document's page in the app."""
    url = (metadata or {}).get("source_url")
    if not isinstance(url, str) or canonical_url(url) is None:
        return None
    if not host_allowed(url, normalise_domains(metadata.get("allowed_domains") or ())):
        return None
    if ceiling and not host_allowed(url, normalise_domains(ceiling)):
        return None
    return url
