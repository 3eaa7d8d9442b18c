"""Website import, framework-free: canonical URLs (A5) and the allowlist (A4), the SSRF guard and
capped fetching, robots.txt, main-text extraction, and the crawler that ties them together.

Libraries: courlan (URL normalisation, tracking-parameter removal), Protego (robots.txt, Google's
reading of it), trafilatura (main text of a page), lxml (links and rel=canonical), httpx (HTTP).
The Django side (documents/sites.py) stores what the crawler finds through the one ingestion pipeline.

References: axioms A4 and A5: docs/specs/rag-standard-v1.md.
"""

from ragchat.services.web.crawler import CrawlConfig, Crawler, CrawlStats, Page, Refusal
from ragchat.services.web.fetch import FetchPolicy, FetchRefused
from ragchat.services.web.urls import canonical_url, host_allowed, normalise_domains

__all__ = [
    "CrawlConfig",
    "CrawlStats",
    "Crawler",
    "FetchPolicy",
    "FetchRefused",
    "Page",
    "Refusal",
    "canonical_url",
    "host_allowed",
    "normalise_domains",
]
