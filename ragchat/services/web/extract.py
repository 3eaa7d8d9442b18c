"""What a fetched HTML page holds for the crawler: its main text (trafilatura, as Markdown so the
headings become sections), its title, rel=canonical, robots meta directives and its links (lxml)."""

from __future__ import annotations

from dataclasses import dataclass, field

import lxml.html
import trafilatura
from lxml.etree import ParserError


@dataclass(frozen=True)
class ExtractedPage:
    title: str
    text: str  # Markdown: "# Heading" lines and paragraphs; empty when no main text was found
    canonical: str | None  # the rel=canonical href as written (relative or absolute)
    links: list[str] = field(default_factory=list)  # hrefs as written, resolved against <base>
    base: str | None = None
    noindex: bool = False
    nofollow: bool = False


def extract_page(html: str, *, url: str) -> ExtractedPage:
    try:
        tree = lxml.html.fromstring(html) if html.strip() else None
    except (ParserError, ValueError):
        tree = None
    canonical, links, base, title = None, [], None, ""
    noindex = nofollow = False
    if tree is not None:
        bases = tree.xpath("//base/@href")
        base = str(bases[0]).strip() if bases else None
        for href in tree.xpath("//link[@href]"):
            rel = (href.get("rel") or "").lower().split()
            if "canonical" in rel:
                canonical = href.get("href").strip()
                break
        for meta in tree.xpath("//meta[@name]"):
            if meta.get("name", "").lower() in ("robots", "ragchat"):
                directives = {d.strip().lower() for d in (meta.get("content") or "").split(",")}
                noindex |= bool({"noindex", "none"} & directives)
                nofollow |= bool({"nofollow", "none"} & directives)
        for anchor in tree.xpath("//a[@href]"):
            if "nofollow" in (anchor.get("rel") or "").lower().split():
                continue
            links.append(anchor.get("href").strip())
        titles = tree.xpath("//title/text()")
        title = " ".join(str(titles[0]).split()) if titles else ""
    document = trafilatura.bare_extraction(
        html, url=url, with_metadata=True, include_formatting=True, include_tables=True, include_links=False
    )
    text = ""
    if document is not None:  # a trafilatura Document (a dict only with as_dict=True)
        text = (getattr(document, "text", "") or "").strip()
        title = (getattr(document, "title", "") or "").strip() or title
    return ExtractedPage(
        title=title[:300],
        text=text,
        canonical=canonical,
        links=links,
        base=base,
        noindex=noindex,
        nofollow=nofollow,
    )
