"""LLM output to safe HTML: Markdown (ragchat.markup: markdown-it-py, raw HTML off, images off) sanitised by nh3,
then `[SourceId: …]` markers replaced by numbered citation markers with hover/focus cards.

Markers are swapped for private-use placeholders before Markdown so the Markdown and the sanitiser
never see them; the marker HTML we insert afterwards is the chat/_cite.html partial (auto-escaped).
Numbering is by order of first use among the SourceIds we know; unknown or malformed markers vanish.

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from django.urls import NoReverseMatch, reverse
from django.utils.safestring import SafeString

from ragchat import markup
from ragchat.markup import snippet_html
from ragchat.partials import render_partial
from ragchat.services.citations import citation_from_result, model_cited_source_ids
from ragchat.services.types import ATTRIBUTED_PATTERN, SOURCEID_PATTERN, Citation, SearchResult
from ragchat.templatetags.sources import passage_text, shown_section, source_place

_SOURCEID_RE = re.compile(SOURCEID_PATTERN)
_ATTRIBUTED_RE = re.compile(ATTRIBUTED_PATTERN)
# Any bracketed SourceId marker, well-formed or not: what is not a known source is dropped.
_ANY_MARKER_RE = re.compile(r"[ \t]*\[\s*SourceId\s*:[^\]\n]*\]", re.IGNORECASE)
# While streaming, the tail may hold the start of a marker ("[Sourc", "[SourceId: 5a3f"): hide it.
_PARTIAL_MARKER_RE = re.compile(r"\[(?:S(?:o(?:u(?:r(?:c(?:e(?:I(?:d(?::[^\]\n]*)?)?)?)?)?)?)?)?)?$", re.IGNORECASE)
# A marker's placeholder while the Markdown renders: it opens with "⸨" (U+2E28, punctuation, so
# "**bold.**" right before a marker still closes its emphasis; CommonMark's flanking rule needs
# punctuation or space after "**" that follows punctuation) and closes with a private-use character
# that never occurs in text: one for the model's markers, another for those ragchat attributed.
_MARK_OPEN, _MARK_CLOSE, _MARK_CLOSE_ATTRIBUTED = "\u2e28", "\ue001", "\ue002"
_PLACEHOLDER_RE = re.compile(f"{_MARK_OPEN}(\\d+)([{_MARK_CLOSE}{_MARK_CLOSE_ATTRIBUTED}])")
# A marker right after another copy of itself ("…[1][1]") shows once.
_REPEAT_RE = re.compile(f"({_MARK_OPEN}(\\d+)([{_MARK_CLOSE}{_MARK_CLOSE_ATTRIBUTED}]))(?:\\s*{_MARK_OPEN}\\2\\3)+")


def markdown_to_html(text: str) -> str:
    """A chat message's Markdown as HTML; its links keep their address only inside the app, as mail,
    or on an allowlisted domain (a document may tell the model to add an outside link)."""
    return markup.markdown_to_html(text, outside_links=False)


def citation_to_dict(citation: Citation) -> dict[str, Any]:
    return asdict(citation)


def passages_from_results(results: Iterable[SearchResult]) -> list[dict[str, Any]]:
    """Retrieved chunks as Citation-shaped dicts (what a source card and the sources list need)."""
    return [citation_to_dict(citation_from_result(r)) for r in results]


def document_url(document_id: str) -> str:
    """The access-checked document page, if the documents app exposes one."""
    for name in ("documents:detail", "documents:document_detail"):
        try:
            return reverse(name, args=[document_id])
        except NoReverseMatch:
            continue
    return ""


def viewer_url(source: dict[str, Any]) -> str:
    """The access-checked viewer at the cited passage (documents/viewer_views.py): where "Open
    passage" leads; the #passage anchor brings it into view."""
    try:
        url = reverse("documents:view", args=[source["document_id"]])
    except (NoReverseMatch, KeyError):
        return ""
    index = source.get("chunk_index")
    return f"{url}?chunk={int(index)}#passage" if isinstance(index, int) else url


def source_url(source: dict[str, Any]) -> str:
    """Where a citation links: the web page it was taken from, only inside the allowlist stored with
    it and the server's RAG_ALLOWLIST_DOMAINS (A4, ragchat.services.web.urls.citation_link); else the
    access-checked document page."""
    from django.conf import settings

    from ragchat.services.web.urls import citation_link

    page = citation_link(source.get("metadata") or {}, getattr(settings, "RAG_ALLOWLIST_DOMAINS", ()))
    return page or document_url(source["document_id"])


@dataclass(frozen=True)
class RenderedAnswer:
    html: str
    # The cited sources in marker order, each with "n", "url", "viewer_url" and "attributed"
    # (ragchat attached every marker naming it).
    sources: list[dict[str, Any]]


@dataclass
class _Numbering:
    """Citation numbers by first use, and how often each number was shown so far (card ids): kept
    across the pieces of a draft rendered one after another, so they number as the whole would."""

    by_id: dict[str, dict[str, Any]]
    numbers: dict[str, int] = field(default_factory=dict)
    sources: list[dict[str, Any]] = field(default_factory=list)
    seen: dict[int, int] = field(default_factory=dict)
    # Marker HTML by (source, number, occurrence, attributed), shared by the copies: a streaming
    # draft re-renders its open tail every frame, and a template render per marker per frame would
    # dominate its cost.
    markers: dict[tuple[str, int, int, bool], str] = field(default_factory=dict)

    def copy(self) -> _Numbering:
        return _Numbering(self.by_id, dict(self.numbers), list(self.sources), dict(self.seen), self.markers)

    def marker_html(self, n: int, *, prefix: str, attributed: bool = False) -> str:
        self.seen[n] = occurrence = self.seen.get(n, 0) + 1
        source = self.sources[n - 1]
        key = (source["source_id"], n, occurrence, attributed)
        if key not in self.markers:
            self.markers[key] = _marker_html(source, prefix=prefix, occurrence=occurrence, attributed=attributed)
        return self.markers[key]

    def apply(self, text: str) -> str:
        def replace(match: re.Match[str]) -> str:
            well_formed = _SOURCEID_RE.fullmatch(match.group(0).lstrip())
            source_id = well_formed.group(1) if well_formed else None
            if source_id is None or source_id not in self.by_id:
                return ""
            if source_id not in self.numbers:
                self.numbers[source_id] = len(self.numbers) + 1
                found = self.by_id[source_id]
                self.sources.append(
                    {**found, "n": self.numbers[source_id], "url": source_url(found), "viewer_url": viewer_url(found)}
                )
            attributed = _ATTRIBUTED_RE.fullmatch(match.group(0).lstrip()) is not None
            return f"{_MARK_OPEN}{self.numbers[source_id]}{_MARK_CLOSE_ATTRIBUTED if attributed else _MARK_CLOSE}"

        # Leading spaces go with the marker: "text [1]." reads "text[1]."; a dropped one leaves no gap.
        text = _ANY_MARKER_RE.sub(replace, text)
        return _REPEAT_RE.sub(r"\1", text)


def _percent(score: Any) -> str:
    try:
        return f"{round(float(score) * 100)}%"
    except (TypeError, ValueError):
        return "N/A"


def _marker_html(source: dict[str, Any], *, prefix: str, occurrence: int, attributed: bool = False) -> str:
    full = passage_text(source, source.get("snippet_full") or "")
    short = passage_text(source, source.get("snippet") or "")
    meta = source.get("metadata") or {}
    n = str(source["n"])  # a str, not an int: the template would localise an int, which costs more than the rest
    return render_partial(
        "chat/_cite.html",
        {
            "n": n,
            "id": f"{prefix}-cite-{n}-{occurrence}",  # a source cited twice has two cards: ids stay unique
            "doc": source.get("document_name") or "Document",
            "place": source_place(source),
            "rel": _percent(source.get("relevance_score")),
            # Snippets of Markdown documents and of verified answers show as text, not as "#" and "**".
            "short": SafeString(snippet_html(short)),
            "full": SafeString(snippet_html(full)),
            "expandable": len(full) > len(short.removesuffix("...")),
            "url": source.get("url") or "",
            "viewer_url": source.get("viewer_url") or "",
            "external": bool(source.get("url")) and not str(source.get("url")).startswith("/"),
            # Verified knowledge (routing publishes an owner's answer): "Verified by <owner>, <date>";
            # one that needs review (a source changed, its review date passed) or was retired says so.
            "verified": bool(meta.get("verified")),
            "verified_by": meta.get("verified_by") or "an owner",
            "verified_at": meta.get("verified_at") or "",
            "knowledge": "" if meta.get("verified") else str(meta.get("knowledge_status") or ""),
            # Marked outdated by an owner since (documents.selectors.with_outdated, at render time).
            "outdated": bool(source.get("outdated")),
            "outdated_note": source.get("outdated_note") or "",
            # The model did not cite this passage here; ragchat found it supports the sentence.
            "attributed": attributed,
        },
    )


def render_answer(
    text: str,
    *,
    known: Sequence[dict[str, Any]],
    prefix: str,
    streaming: bool = False,
    grounding: dict[str, Any] | None = None,
) -> RenderedAnswer:
    """The answer as safe HTML with numbered markers; `known` are the sources markers may point to.
    `grounding` (a stored GroundingReport dict): its unsupported sentences are marked."""
    numbering = _Numbering(by_id={c["source_id"]: c for c in known})
    spans = _unsupported_spans(text, grounding)
    html = _render_piece(_mark_claims(text, spans), numbering, prefix=prefix, streaming=streaming, claims=bool(spans))
    by_model = model_cited_source_ids(text)
    sources = [{**s, "attributed": s["source_id"] not in by_model} for s in numbering.sources]
    return RenderedAnswer(html=html, sources=sources)


# Unsupported sentences (axiom A2) are marked with private-use sentinels before Markdown and turned
# into a subtly underlined span with an explanation afterwards; a sentence whose HTML crosses a
# block (a list item into the next) gets the explanation mark only.
_CLAIM_OPEN, _CLAIM_CLOSE = "\ue010", "\ue011"
_CLAIM_RE = re.compile(f"{_CLAIM_OPEN}(.*?){_CLAIM_CLOSE}", re.DOTALL)
_BLOCK_TAG_RE = re.compile(r"</?(?:p|li|ul|ol|h[1-6]|pre|blockquote|table|thead|tbody|tr|td|th|hr|br)\b")
_INLINE_TAGS = ("strong", "em", "code", "a", "del", "s")
ATTRIBUTED_NOTE = "attributed by ragchat"
CLAIM_NOTE = "No passage among this answer's sources supports this sentence. Check it before relying on it."


def _unsupported_spans(text: str, grounding: dict[str, Any] | None) -> list[tuple[int, int]]:
    sentences = (grounding or {}).get("sentences") or []
    spans = []
    for s in sentences:
        start, end = s.get("start"), s.get("end")
        if s.get("status") == "unsupported" and isinstance(start, int) and isinstance(end, int):
            if 0 <= start < end <= len(text):
                spans.append((start, end))
    return sorted(spans)


def _mark_claims(text: str, spans: Sequence[tuple[int, int]]) -> str:
    for start, end in reversed(spans):
        text = text[:start] + _CLAIM_OPEN + text[start:end] + _CLAIM_CLOSE + text[end:]
    return text


def _claim_html(match: re.Match[str]) -> str:
    inner = match.group(1)
    balanced = all(len(re.findall(f"<{t}[ >]", inner)) == inner.count(f"</{t}>") for t in _INLINE_TAGS)
    wrap = balanced and not _BLOCK_TAG_RE.search(inner)
    # `inner` is the Markdown renderer's escaped HTML.
    return render_partial("chat/_claim.html", {"inner": SafeString(inner), "wrap": wrap, "note": CLAIM_NOTE})


# In a file (an export), after a sentence no source supports.
CLAIM_MARK = "_(No source supports this sentence: check it before relying on it.)_"


def answer_markdown(
    text: str,
    *,
    known: Sequence[dict[str, Any]],
    grounding: dict[str, Any] | None = None,
    passages: Sequence[dict[str, Any]] = (),
) -> str:
    """The answer as Markdown to paste elsewhere (copy, export): markers numbered as on the page,
    "[1]", and the sources listed under it (a source only ragchat attributed says so). With
    `grounding`, each sentence no source supports is followed by CLAIM_MARK; `passages`: the
    other passages found, listed after the sources (a failed or stopped answer's)."""
    numbering = _Numbering(by_id={c["source_id"]: c for c in known})
    by_model = model_cited_source_ids(text)
    for _, end in reversed(_unsupported_spans(text, grounding)):
        text = text[:end] + _CLAIM_CLOSE + text[end:]
    # In plain text a number reads better apart from its word: "25 days [1]".
    body = _PLACEHOLDER_RE.sub(lambda m: f" [{m.group(1)}]", numbering.apply(text)).replace("  [", " [").strip()
    body = body.replace(_CLAIM_CLOSE, f" {CLAIM_MARK}")
    lines = [body]
    if numbering.sources:
        lines += ["", "Sources:"]
    for source in numbering.sources:
        lines.append(
            f"- [{source['n']}] {_document_and_place(source)}"
            + ("" if source["source_id"] in by_model else f" - {ATTRIBUTED_NOTE}")
        )
    if passages:
        lines += ["", "Other passages found:" if numbering.sources else "Passages found for your question:"]
    for passage in passages:
        snippet = " ".join(str(passage.get("snippet") or "").split())
        lines.append(f"- {_document_and_place(passage)}" + (f': "{snippet}"' if snippet else ""))
    return "\n".join(lines)


def _document_and_place(source: dict[str, Any]) -> str:
    where = [f"page {source['page_number']}"] if source.get("page_number") is not None else []
    where += [shown_section(source)] if shown_section(source) else []
    return (source.get("document_name") or "Document") + (f" ({', '.join(where)})" if where else "")


_OPEN_FENCE_RE = re.compile(r"^ {0,3}(```|~~~)", re.MULTILINE)
_CODE_SPAN_RE = re.compile(r"`[^`\n]*`")


def close_open_inline(text: str) -> str:
    """A streaming tail with its half-finished inline Markdown closed, so "**25 da" shows as bold
    text, not "**25 da", until the model writes the closing "**" (nothing is closed inside an open
    code fence, which Markdown already runs to the end)."""
    if len(_OPEN_FENCE_RE.findall(text)) % 2:
        return text
    last = text.rsplit("\n\n", 1)[-1]
    if last.count("`") % 2:
        return text + "`"
    plain = _CODE_SPAN_RE.sub("", last)
    closing = ""
    for mark in ("**", "__"):
        if plain.count(mark) % 2:
            closing += mark
            plain = plain.replace(mark, "")
    stripped = text.rstrip()
    if stripped.endswith(("*", "_")) and not closing:
        return stripped.rstrip("*_")  # an opening mark with nothing after it yet
    return text.rstrip() + closing[::-1] if closing else text


def _render_piece(text: str, numbering: _Numbering, *, prefix: str, streaming: bool, claims: bool = False) -> str:
    if streaming:
        text = close_open_inline(_PARTIAL_MARKER_RE.sub("", text))
    html = markdown_to_html(numbering.apply(text))
    if claims:
        html = _CLAIM_RE.sub(_claim_html, html)
    return _PLACEHOLDER_RE.sub(
        lambda match: numbering.marker_html(
            int(match.group(1)), prefix=prefix, attributed=match.group(2) == _MARK_CLOSE_ATTRIBUTED
        ),
        html,
    )


# A draft grows at its end; what lies before its last blank line is settled, unless the next block
# could still change how it reads: an indented or list-item line (a list going on, or turning loose),
# a "[" (a link definition, or a citation marker that would fold into the one before it), or an open
# code fence. Those cases wait for a later blank line.
_FENCE_RE = re.compile(r"^ {0,3}(?:```|~~~)", re.MULTILINE)
_UNSAFE_BLOCK_START_RE = re.compile(r"[ \t\n]|[-*+>#|\[]|\d{1,9}[.)]|=|\Z")


def settled_length(text: str, start: int = 0) -> int:
    """Where the settled part of a streaming draft ends (a block boundary at or after `start`), or
    `start` if no later boundary is safe: rendering text[:n] and text[n:] apart gives the whole's HTML."""
    at = text.rfind("\n\n", start)
    while at >= start and at != -1:
        cut = at + 2
        if not _UNSAFE_BLOCK_START_RE.match(text, cut) and len(_FENCE_RE.findall(text, 0, cut)) % 2 == 0:
            return cut
        at = text.rfind("\n\n", start, at)
    return start


@dataclass
class DraftRenderer:
    """Renders a streaming draft as render_answer(streaming=True) would, in time proportional to what
    is new: the settled blocks are rendered once and kept, only the open tail is rendered per frame."""

    prefix: str
    known: Sequence[dict[str, Any]] = ()
    settled_text: str = ""
    settled_html: str = ""
    numbering: _Numbering | None = None

    def render(self, text: str, *, known: Sequence[dict[str, Any]]) -> str:
        if self.numbering is None or known is not self.known or not text.startswith(self.settled_text):
            self.known = known
            self.numbering = _Numbering(by_id={c["source_id"]: c for c in known})
            self.settled_text = self.settled_html = ""
        cut = settled_length(text, len(self.settled_text))
        if cut > len(self.settled_text):
            piece = text[len(self.settled_text) : cut]
            self.settled_html += _render_piece(piece, self.numbering, prefix=self.prefix, streaming=False)
            self.settled_text = text[:cut]
        tail = text[len(self.settled_text) :]
        if not tail:
            return self.settled_html
        return self.settled_html + _render_piece(tail, self.numbering.copy(), prefix=self.prefix, streaming=True)
