"""Markdown to safe HTML, for every page that shows Markdown: answers (chat.rendering), Markdown
documents and published verified answers in the viewer, and snippets of them in citation cards and
source lists.

markdown-it-py renders (raw HTML off, images off: remote images are a tracking and exfiltration
channel, R-OPS-7); nh3 sanitises what it produced.

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

import functools
import html
import re

import nh3
from django.conf import settings
from markdown_it import MarkdownIt

from ragchat.services.web.urls import host_allowed, normalise_domains

ALLOWED_TAGS = {
    "p",
    "br",
    "hr",
    "em",
    "strong",
    "del",
    "s",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "a",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
}  # fmt: skip — no img
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"style"}, "td": {"style"}}
# A snippet sits inside a line of a card or a list: its blocks flatten to text, its emphasis stays.
SNIPPET_TAGS = {"em", "strong", "del", "s", "code"}

# What gives a text away as Markdown: a heading, emphasis, a list item, a link, a code span, a table row.
_MARKDOWN_SIGNS = re.compile(
    r"(^|\n)\s{0,3}(#{1,6}\s|[-*+]\s|\d+[.)]\s|>\s|\|.*\|)|\*\*\S|__\S|`[^`\n]+`|\[[^\]\n]+\]\([^)\s]+\)"
)


@functools.cache
def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.disable("image")  # ![alt](url) stays literal text
    return md


def _inside_link(element: str, attribute: str, value: str) -> str | None:
    """A link keeps its address only inside the app (a relative path or an anchor), as an email
    address, or on a domain of RAG_ALLOWLIST_DOMAINS: a document that tells the model to add a link
    to an outside address (phishing, exfiltration in the query string) leaves plain text."""
    if element != "a" or attribute != "href":
        return value
    address = value.strip()
    if address.startswith(("mailto:", "#")) or (address.startswith("/") and not address.startswith("//")):
        return value
    return value if host_allowed(address, normalise_domains(getattr(settings, "RAG_ALLOWLIST_DOMAINS", ()))) else None


def sanitize_html(html: str, *, outside_links: bool = True) -> str:
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        attribute_filter=None if outside_links else _inside_link,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener nofollow noreferrer",
        set_tag_attribute_values={"a": {"target": "_blank"}},
        strip_comments=True,
    )


def markdown_to_html(text: str, *, outside_links: bool = True) -> str:
    """`outside_links=False` for text a model wrote: its links keep their address only inside the
    app, as mail, or on an allowlisted domain (`_inside_link`)."""
    return sanitize_html(_markdown().render(text), outside_links=outside_links)


def looks_like_markdown(text: str) -> bool:
    return bool(_MARKDOWN_SIGNS.search(text or ""))


def snippet_html(text: str) -> str:
    """A snippet as one line of rendered text: Markdown's headings, lists and links become their
    words, its emphasis and code stay; a snippet that is no Markdown is only escaped."""
    if not looks_like_markdown(text):
        return html.escape(text or "", quote=False)
    rendered = nh3.clean(_markdown().render(text), tags=SNIPPET_TAGS, attributes={}, strip_comments=True)
    return " ".join(rendered.split())
