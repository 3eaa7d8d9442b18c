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
    page = _getter(source)("page_number")
    parts = [f"Page {page}" if page not in (None, "", "N/A") else "", shown_section(source)]
    return " · ".join(str(part) for part in parts if part)


def shown_section(source: Any) -> str:
    """The passage's section as a reader is told it: "" when unknown, or when it only repeats the
    source's name (a verified answer's question is both its name and its heading)."""
    get = _getter(source)
    section = get("section")
    if section in (None, "", "N/A") or _same(section, get("document_name")):
        return ""
    return str(section)


def _getter(source: Any):
    return source.get if isinstance(source, dict) else lambda key: getattr(source, key, None)


def _same(a: Any, b: Any) -> bool:
    return bool(a) and bool(b) and " ".join(str(a).split()).casefold() == " ".join(str(b).split()).casefold()


# A verified answer published before its document held only the question as heading and the answer
# as text (routing.knowledge.knowledge_text) reads "<question>\nQuestion: <question>\nAnswer: ...".
_LABELLED_QUESTION = "Question: "
_LABELLED_ANSWER = "Answer: "


def passage_text(source: Any, text: str) -> str:
    """A passage's text as it shows under its source's name: without an opening line that only
    repeats that name (a chunk opens with its section's heading, and a verified answer's heading is
    its question, which is also its name)."""
    name = _getter(source)("document_name")
    first, newline, rest = (text or "").partition("\n")
    if not newline or not rest.strip() or not _same(first, name):
        return text or ""
    rest = rest.lstrip()
    second, newline, after = rest.partition("\n")
    if newline and second.startswith(_LABELLED_QUESTION) and _same(second.removeprefix(_LABELLED_QUESTION), name):
        rest = after.lstrip().removeprefix(_LABELLED_ANSWER)
    return rest


@register.filter
def passage(source: Any, field: str = "snippet") -> str:
    """`{{ source|passage }}` / `{{ source|passage:"snippet_full" }}`: the source's snippet (that
    field, else its short one) as rendered text (`snippet`), without a line repeating its name."""
    get = _getter(source)
    return snippet(passage_text(source, str(get(field) or get("snippet") or "")))


@register.filter
def snippet(text: Any) -> str:
    """A passage's snippet as rendered text (Markdown's marks become formatting, not "#" and "**")."""
    from django.utils.safestring import mark_safe

    from ragchat.markup import snippet_html

    return mark_safe(snippet_html(str(text or "")))  # noqa: S308 — nh3 escaped and sanitised it
