"""SourceId context blocks and deterministic citation extraction (spec v3 steps 4 and 6).

Citations come only from SOURCEID_PATTERN matches in the answer that map to a chunk that was in the
prompt: no LLM-dependent parsing. Unknown ids are dropped and logged; malformed markers never match.

References: "spec v3": docs/specs/rag-service-spec-v3-FINAL.md.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from .prompts import CONTEXT_CHUNK_FORMAT, CONTEXT_CHUNK_SEPARATOR
from .types import ATTRIBUTED_PATTERN, SOURCEID_PATTERN, Citation, SearchResult

logger = logging.getLogger(__name__)

SNIPPET_CHARS = 200
SNIPPET_FULL_CHARS = 1000

_SOURCEID_RE = re.compile(SOURCEID_PATTERN)
_ATTRIBUTED_RE = re.compile(ATTRIBUTED_PATTERN)
# Any bracketed SourceId marker, well-formed or not, for removal before term counting.
_ANY_SOURCEID_MARKER_RE = re.compile(r"\[\s*SourceId:[^\]]*\]", re.IGNORECASE)


def format_chunk(chunk: SearchResult) -> str:
    return CONTEXT_CHUNK_FORMAT.format(
        document_id=chunk.document_id,
        chunk_index=chunk.chunk_index,
        document_name=chunk.document_name,
        page_number="N/A" if chunk.page_number is None else chunk.page_number,
        section=chunk.section or "N/A",
        chunk_text=chunk.chunk_text,
    )


def build_context(chunks: Sequence[SearchResult]) -> str:
    """The CONTEXT block of the system prompt: every chunk under its SourceId header."""
    return CONTEXT_CHUNK_SEPARATOR.join(format_chunk(c) for c in chunks)


def make_snippet(text: str) -> tuple[str, str]:
    """(snippet, snippet_full): the first 200 chars plus "..." if cut, and the first 1000 chars."""
    snippet = text[:SNIPPET_CHARS] + ("..." if len(text) > SNIPPET_CHARS else "")
    return snippet, text[:SNIPPET_FULL_CHARS]


def strip_source_ids(text: str) -> str:
    """The text without its [SourceId: ...] markers (for term counting, not for display)."""
    return _ANY_SOURCEID_MARKER_RE.sub(" ", text)


def cited_source_ids(answer: str) -> list[str]:
    """Well-formed SourceIds in the answer, in order of first use, without repeats."""
    return list(dict.fromkeys(_SOURCEID_RE.findall(answer)))


def model_cited_source_ids(answer: str) -> set[str]:
    """SourceIds the model itself cites in the answer (not only in markers ragchat attached)."""
    return {m.group(1) for m in _SOURCEID_RE.finditer(answer) if _ATTRIBUTED_RE.fullmatch(m.group()) is None}


def citation_from_result(result: SearchResult) -> Citation:
    snippet, snippet_full = make_snippet(result.chunk_text)
    return Citation(
        source_id=result.source_id,
        document_id=result.document_id,
        document_name=result.document_name,
        chunk_index=result.chunk_index,
        page_number=result.page_number,
        section=result.section,
        relevance_score=result.score,
        snippet=snippet,
        snippet_full=snippet_full,
        metadata=dict(result.metadata),
    )


def extract_citations(answer: str, results: Sequence[SearchResult]) -> list[Citation]:
    """Map the answer's SourceIds to the chunks that were in the prompt.

    Order is order of first use; a repeated id gives one citation; an id that matches no chunk
    (a hallucinated or budget-dropped one) is logged and left out. A citation whose every marker
    ragchat attached (services/attribution.py) is `attributed`.
    """
    by_id = {r.source_id: r for r in results}
    by_model = model_cited_source_ids(answer)
    citations: list[Citation] = []
    for source_id in cited_source_ids(answer):
        result = by_id.get(source_id)
        if result is None:
            logger.warning(
                "unknown SourceId in answer dropped: %s",
                source_id,
                extra={"event": "citation_unknown_source_id", "source_id": source_id},
            )
            continue
        citation = citation_from_result(result)
        citation.attributed = source_id not in by_model
        citations.append(citation)
    return citations


# --- Real models' citation habits -------------------------------------------------------------
# The prompt asks for "[SourceId: <document id>:<chunk>]" and shows one. Small local models write
# it their own way: "[S1]", "[Source 1]", "[1]" or "Source 1" for the first passage of the prompt,
# several ids in one bracket, stray spaces and case, "(SourceId: …)", full-width brackets and
# colons, the bare id, the document's name, and ids that were never in the prompt. Each marker that
# names prompt passages is rewritten to the canonical form; a marker naming only unknown ids is
# dropped with the white space before it. Code (fenced blocks, inline spans) is left alone.

_OPENERS = {"[": "]", "【": "】", "［": "］", "(": ")", "（": "）"}
_BRACKET_RE = re.compile(r"[\[【［(（][^\[\]【】［］()（）\n]{1,300}[\]】］)）]")
_ID_SEPARATOR_RE = re.compile(r"\s*(?:[,;、，；]|\band\b|&)\s*", re.IGNORECASE)
_FULL_ID_RE = re.compile(
    r"(?:source\s*id|source|id)?\s*[:：=#]?\s*([a-f0-9]{8}(?:-[a-f0-9]{4}){3}-[a-f0-9]{12})\s*[:：]\s*(\d+)",
    re.IGNORECASE,
)
_NUMBERED_RE = re.compile(
    r"(?:(?:source\s*id|source|src|s|passage|chunk|context|doc(?:ument)?)\s*[:：#]?\s*)(\d{1,3})", re.IGNORECASE
)
_BARE_NUMBER_RE = re.compile(r"(\d{1,3})")
_NAMED_RE = re.compile(r"(?:(?:source|document|doc)\s*[:：]\s*)?(.+)", re.IGNORECASE)
_PROSE_SOURCE_RE = re.compile(r"(?<![\w\[【［(（])source[ \t]+(\d{1,3})(?![\w]|[ \t]*[\]】］)）])", re.IGNORECASE)
_INLINE_CODE_RE = re.compile(r"`[^`\n]*`")
_FENCE_RE = re.compile(r" {0,3}(`{3,}|~{3,})")
_CANONICAL_RE = re.compile(r"\[SourceId: [a-f0-9-]{36}:\d+\]")


def canonical_marker(source_id: str) -> str:
    return f"[SourceId: {source_id}]"


def attributed_marker(source_id: str) -> str:
    """The marker of a citation ragchat attached, not the model (services/attribution.py)."""
    return f"[SourceId: {source_id}; attributed]"


# The attributed form is ragchat's alone: written by the model (or copied from a passage) it is the
# model's own citation, and becomes the canonical marker.
_ATTRIBUTED_WORD_RE = re.compile(r"\s*attributed\s*", re.IGNORECASE)


class _Sources:
    def __init__(self, chunks: Sequence[SearchResult]) -> None:
        self.ids = [c.source_id for c in chunks]
        self.known = set(self.ids)
        names: dict[str, str] = {}
        for c in chunks:
            names.setdefault(c.document_name.strip().lower(), c.source_id)
        self.by_name = names

    def nth(self, n: int) -> str | None:
        return self.ids[n - 1] if 1 <= n <= len(self.ids) else None


def _resolve(item: str, sources: _Sources, *, bare_numbers: bool) -> tuple[bool, str | None]:
    """(is this a reference, the prompt passage it names or None if invented)."""
    item = item.strip()
    if m := _FULL_ID_RE.fullmatch(item):
        source_id = f"{m.group(1).lower()}:{int(m.group(2))}"
        return True, source_id if source_id in sources.known else None
    if m := _NUMBERED_RE.fullmatch(item):
        return True, sources.nth(int(m.group(1)))
    if bare_numbers and (m := _BARE_NUMBER_RE.fullmatch(item)):
        return True, sources.nth(int(m.group(1)))
    if m := _NAMED_RE.fullmatch(item):
        named = sources.by_name.get(m.group(1).strip().strip("\"'“”").lower())
        if named is not None:
            return True, named
    return False, None


def _rewrite_bracket(match: re.Match[str], text: str, sources: _Sources, *, after_marker: bool) -> str | None:
    """The canonical markers for one bracketed group, "" to drop it, None to leave it as written."""
    group = match.group()
    opener, inner = group[0], group[1:-1]
    if _OPENERS[opener] != group[-1]:
        return None
    before = text[max(0, match.start() - 1) : match.start()]
    after = text[match.end() : match.end() + 1]
    square = opener in "[【［"
    # "[1]" is a reference after a space or punctuation, not a link ("[1](…)"). Against a word it
    # is one when it reads as a citation written without its space ("per year[1].", always in
    # full-width brackets) and names a passage of the prompt; not an index ("x[1]", "arr_2[1]").
    glued = re.fullmatch(r"[\w\])]", before) is not None and not after_marker
    bare_numbers = square and after != "(" and (not glued or _glued_reference(text, match, opener))
    items = [i for i in _ID_SEPARATOR_RE.split(inner) if i.strip()]
    if len(items) > 1:
        items = [i for i in items if not _ATTRIBUTED_WORD_RE.fullmatch(i)]
    if not items:
        return None
    resolved = [_resolve(i, sources, bare_numbers=bare_numbers) for i in items]
    if not all(is_ref for is_ref, _ in resolved):
        return None
    if glued and bare_numbers and not all(source_id for _, source_id in resolved):
        return None  # "year[7]" with fewer passages: perhaps no citation at all, left as written
    if not square and not any(_FULL_ID_RE.fullmatch(i.strip()) or _NUMBERED_RE.fullmatch(i.strip()) for i in items):
        return None  # "(Vacation Policy 2026.pdf)" stays prose; "(SourceId: …)" and "(Source 2)" are markers
    ids = list(dict.fromkeys(source_id for _, source_id in resolved if source_id))
    return "".join(canonical_marker(i) for i in ids)


# The word a glued "[1]" follows: letters only, after a space, punctuation other than "." or the start.
_GLUED_WORD_RE = re.compile(r"(?:^|[^\w.])[^\W\d_]{2,}$")


def _glued_reference(text: str, match: re.Match[str], opener: str) -> bool:
    """Whether a bracket written against the text before it is a citation: full-width brackets
    always (no code indexes with them); "[" after a word of letters, followed by the end, white
    space, punctuation or another bracket ("per year[1].", "days[1][2]"), not an index or an
    assignment in code written as prose ("x[1]", "obj.items[1] = 3")."""
    if opener != "[":
        return True
    if _GLUED_WORD_RE.search(text, max(0, match.start() - 40), match.start()) is None:
        return False
    rest = text[match.end() :]
    return re.match(r"(?:[\[(]|[.,;:!?)]*(?:\s|$))", rest) is not None and not re.match(r"\s*=", rest)


def _normalize_prose(text: str, sources: _Sources) -> str:
    out: list[str] = []
    pos = 0
    marker_end = -1  # where the last citation marker ended: "[1][2]" is two references
    for match in _BRACKET_RE.finditer(text):
        if _CANONICAL_RE.fullmatch(match.group()) and match.group()[11:-1] in sources.known:
            marker_end = match.end()
            continue
        replacement = _rewrite_bracket(match, text, sources, after_marker=match.start() == marker_end)
        if replacement is None:
            continue
        marker_end = match.end()
        start = match.start()
        if not replacement:  # only invented ids: the marker goes with the space before it
            start = len(text[:start].rstrip(" \t"))
            if start < pos:
                start = pos
        out.append(text[pos:start])
        out.append(replacement)
        pos = match.end()
    out.append(text[pos:])
    text = "".join(out)

    def prose(m: re.Match[str]) -> str:
        source_id = sources.nth(int(m.group(1)))
        return canonical_marker(source_id) if source_id else m.group()

    return _PROSE_SOURCE_RE.sub(prose, text)


def normalize_citations(answer: str, chunks: Sequence[SearchResult]) -> str:
    """The answer with every citation in the canonical "[SourceId: <id>]" form and invented ones
    dropped; `chunks` are the prompt's passages in prompt order ("[1]" is the first)."""
    normalizer = CitationNormalizer(chunks)
    return normalizer.feed(answer) + normalizer.finish()


def _normalize_line(line: str, sources: _Sources) -> str:
    """One line outside fenced code (no marker spans lines); inline code spans are left alone."""
    out: list[str] = []
    pos = 0
    for code in _INLINE_CODE_RE.finditer(line):
        out.append(_normalize_prose(line[pos : code.start()], sources))
        out.append(code.group())
        pos = code.end()
    out.append(_normalize_prose(line[pos:], sources))
    return "".join(out)


_PARTIAL_PROSE_RE = re.compile(r"(?<!\w)(?:s|so|sou|sour|sourc|source|sources?[ \t]+\d{0,3})$", re.IGNORECASE)
_HOLD_CHARS = 300


def _hold_point(line: str) -> int:
    """Where a marker that may still be completing starts at the end of the line being streamed
    (with the white space before it, which goes if the marker is dropped); len(line) if nowhere."""
    hold = len(line)
    for i in range(hold - 1, max(0, hold - _HOLD_CHARS) - 1, -1):
        ch = line[i]
        if ch in "]】］)）":
            break
        if ch in _OPENERS:
            hold = i
            break
    if (m := _PARTIAL_PROSE_RE.search(line, max(0, hold - 20))) is not None:
        hold = min(hold, m.start())
    if line[:hold].count("`") % 2:
        hold = line.rfind("`", 0, hold)  # an inline code span still open
    return len(line[:hold].rstrip(" \t"))


# Reversed: white space right after a sentence's end (". " read backwards is " .").
_SENTENCE_GAP_RE = re.compile(r"[ \t]+(?=[.!?])")
_SETTLE_AFTER = 200  # characters of a line normalised again on each piece before settling


class CitationNormalizer:
    """`normalize_citations` for a stream: `feed` each piece, `finish` once; the pieces returned
    join to the normalised answer, and a marker still being written is held back until it closes
    (or the stream ends), so what the asker sees is what is stored and checked.

    Markers never span lines, so the text is normalised line by line (fenced code blocks verbatim);
    each piece costs the length of the line it ends in, not of the answer so far."""

    def __init__(self, chunks: Sequence[SearchResult]) -> None:
        self._sources = _Sources(chunks)
        self._line = ""  # the raw line being written
        self._line_sent = ""  # what has been given out for it
        # A long line is settled up to its last finished sentence: (raw length, its output).
        self._settled: tuple[int, str] = (0, "")
        self._fence: tuple[str, int] | None = None  # the open fence's character and length
        self._sent: list[str] = []

    @property
    def text(self) -> str:
        """Everything given out so far."""
        return "".join(self._sent)

    def _line_output(self, line: str, *, complete: bool) -> str:
        settled, settled_out = self._settled
        if settled:  # a prose line with finished sentences: only the rest is normalised again
            return settled_out + _normalize_line(line[settled:], self._sources)
        if self._fence is not None:
            char, length = self._fence
            if complete and re.fullmatch(rf" {{0,3}}{re.escape(char)}{{{length},}}[ \t]*\n?", line):
                self._fence = None
            return line
        if (fence := _FENCE_RE.match(line)) is not None and not (
            fence.group(1)[0] == "`" and "`" in line[fence.end() :]
        ):
            if complete:
                self._fence = (fence.group(1)[0], len(fence.group(1)))
            return line
        return _normalize_line(line, self._sources)

    def _settle(self, upto: int) -> None:
        """Settle the line up to the white space after its last finished sentence before `upto`:
        nothing after that point changes what comes before it (no marker, code span or dropped
        marker's white space crosses it)."""
        settled = self._settled[0]
        boundary = _SENTENCE_GAP_RE.search(self._line[::-1], len(self._line) - upto, len(self._line) - settled)
        if boundary is None:
            return
        cut = len(self._line) - boundary.end()  # the line up to the sentence's end mark, inclusive
        if cut <= settled or self._line[:cut].count("`") % 2:
            return
        self._settled = (cut, self._line_output(self._line[:cut], complete=False))

    def _give(self, normalized: str) -> str:
        if not normalized.startswith(self._line_sent):  # never expected: keep what was sent
            logger.warning("citation normalisation diverged mid-stream", extra={"event": "citation_stream_diverged"})
            normalized = self._line_sent + normalized[len(self._line_sent) :]
        piece = normalized[len(self._line_sent) :]
        self._line_sent = normalized
        if piece:
            self._sent.append(piece)
        return piece

    def feed(self, piece: str) -> str:
        self._line += piece
        out: list[str] = []
        while (end := self._line.find("\n")) != -1:
            line, self._line = self._line[: end + 1], self._line[end + 1 :]
            out.append(self._give(self._line_output(line, complete=True)))
            self._line_sent, self._settled = "", (0, "")
        if self._line:
            if self._fence is not None:
                upto = len(self._line)  # code: as it comes
            elif _FENCE_RE.match(self._line):
                upto = 0  # a fence line or not: known when the line ends
            else:
                upto = _hold_point(self._line)
            out.append(self._give(self._line_output(self._line[:upto], complete=False)))
            if self._fence is None and upto - self._settled[0] > _SETTLE_AFTER:
                self._settle(upto)
        return "".join(out)

    def finish(self) -> str:
        line, self._line = self._line, ""
        piece = self._give(self._line_output(line, complete=True)) if line else ""
        self._line_sent, self._settled = "", (0, "")
        return piece
