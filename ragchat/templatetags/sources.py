"""Template filters for how a source is named to a reader (citation cards, source lists)."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.filter
def source_place(source: Any) -> str:
    """Where in its document a passage is, as far as it is known: "Page 2 · Vacation", "Vacation",
    "Page 2" or "" (a Markdown file has no pages; a short text may have no section). The prompt's
    "N/A" (the context chunk format of docs/specs/rag-service-spec-v3-FINAL.md) is for the model,
    not for the reader."""
    get = source.get if isinstance(source, dict) else lambda key: getattr(source, key, None)
    page, section = get("page_number"), get("section")
    parts = [f"Page {page}" if page not in (None, "", "N/A") else "", "" if section in (None, "", "N/A") else section]
    return " · ".join(str(part) for part in parts if part)


@register.filter
def snippet(text: Any) -> str:
    """A passage's snippet as rendered text (Markdown's marks become formatting, not "#" and "**")."""
    from django.utils.safestring import mark_safe

    from ragchat.markup import snippet_html

    return mark_safe(snippet_html(str(text or "")))  # noqa: S308 — nh3 escaped and sanitised it
