"""Cut a parsed document into overlapping chunks that fit the embedder's input window.

Sentence-aware: chunks are packed from whole sentences; a sentence longer than a chunk is split on
word boundaries. Token-aware: sizes come from the `count_tokens` callable (the embedder's own
tokenizer in production), so "204 tokens" means what the model will see. Chunks never cross a
section heading: a new section starts a new chunk, and the section's heading text opens it. A table
row (`TextBlock.is_row`, each cell labelled with its column's header) is one piece, never split
across chunks unless it alone is longer than a chunk.

Axiom A6 of docs/specs/rag-standard-v1.md: no chunk is longer than `chunk_size`; consecutive chunks
of one section share an overlap within +-20 tokens of `overlap`. The overlap is a tail of the previous chunk: whole
sentences when they land within +-OVERLAP_SENTENCE_SLACK tokens of the setting, else whole words.
Inside a table the overlap is whole rows (none when one row alone is longer than the overlap and
its margin), so that no chunk opens with half a row.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ragchat.services.parsing import ParsedDocument, TextBlock

# Prefer starting the overlap at a sentence start when that is this close to the setting.
OVERLAP_SENTENCE_SLACK = 10
# Room kept in each chunk so that a carried overlap plus the next piece always fits.
OVERLAP_MARGIN = 20


@dataclass(frozen=True)
class Chunk:
    text: str
    chunk_index: int
    page_number: int | None
    section: str | None
    token_count: int


@dataclass(frozen=True)
class _Piece:
    """A sentence, or a window of words from a long sentence, as it will appear in a chunk."""

    text: str
    tokens: int  # content tokens, without the tokenizer's special tokens
    page: int | None
    joiner: str = " "  # placed before the piece when it is not the first in its chunk
    row: bool = False  # a table row: carried into the next chunk's overlap whole or not at all


class _Counter:
    """count_tokens, minus the constant its tokenizer adds to every text ([CLS], [SEP], ...)."""

    def __init__(self, count_tokens: Callable[[str], int]) -> None:
        self.full = count_tokens
        self.specials = max(0, count_tokens(""))
        self._words: dict[str, int] = {}

    def content(self, text: str) -> int:
        return max(0, self.full(text) - self.specials)

    def word(self, word: str) -> int:
        count = self._words.get(word)
        if count is None:
            count = self._words[word] = self.content(word)
        return count


# --------------------------------------------------------------------------------------------
# Sentences
# --------------------------------------------------------------------------------------------

ABBREVIATIONS = frozenset(
    """
    e.g i.e cf vs etc al approx appr ca resp dept est inc ltd co corp llc plc gmbh bros
    mr mrs ms mx dr prof sr jr st sen rep gov gen col capt lt sgt rev hon
    no nos nr fig figs eq eqs sec ch art para vol pp p ed eds op ref
    jan feb mar apr jun jul aug sep sept oct nov dec mon tue wed thu fri sat sun
    a.m p.m u.s u.k u.n e.u ph.d m.sc b.sc z.b bzw usw ggf inkl ca
    """.split()
)
# Candidate end: terminal punctuation, optional closing quotes/brackets, then whitespace.
_CANDIDATE_END = re.compile(r"[.!?\u2026]+[\"'\u201d\u2019)\]]*(?=\s)")
_CJK_END = re.compile(r"[\u3002\uff01\uff1f]+")
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n|\n(?=\s*(?:[-*\u2022\u25aa]\s|\d{1,3}[.)]\s))")


def split_sentences(text: str) -> list[str]:
    """Split text into sentences; abbreviations ("e.g.", "Dr."), initials and decimals do not end one."""
    sentences: list[str] = []
    for paragraph in _PARAGRAPH_BREAK.split(text):
        for part in _split_cjk(paragraph):
            sentences.extend(_split_latin(part))
    return [s for s in (_normalise_space(s) for s in sentences) if s]


def _split_cjk(text: str) -> list[str]:
    parts, start = [], 0
    for match in _CJK_END.finditer(text):
        parts.append(text[start : match.end()])
        start = match.end()
    parts.append(text[start:])
    return parts


def _split_latin(text: str) -> list[str]:
    parts, start = [], 0
    for match in _CANDIDATE_END.finditer(text):
        if _is_boundary(text, match):
            parts.append(text[start : match.end()])
            start = match.end()
    parts.append(text[start:])
    return parts


def _is_boundary(text: str, match: re.Match) -> bool:
    following = text[match.end() :].lstrip()
    if following and following[0].islower():
        return False  # "e.g. the", "approx. ten": a sentence does not start in lower case
    punctuation = match.group(0)
    if not punctuation.startswith(".") or punctuation.startswith(".."):
        return True  # "!", "?", an ellipsis
    # only a short look-back: searching from the paragraph start made long paragraphs quadratic
    before = text[max(0, match.start() - 40) : match.start()].split()
    word = (before[-1] if before else "").lstrip("\"'(\u201c\u2018[").lower()
    if word in ABBREVIATIONS:
        return False
    if len(word) == 1 and word.isalpha():
        return False  # an initial: "J. Smith"
    if re.fullmatch(r"(?:[a-z]\.)+[a-z]", word):
        return False  # "u.s.a", "e.g" written with inner dots
    return True


def _normalise_space(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


# --------------------------------------------------------------------------------------------
# Chunks
# --------------------------------------------------------------------------------------------


def chunk_document(
    *,
    parsed: ParsedDocument,
    chunk_size: int,
    overlap: int,
    count_tokens: Callable[[str], int],
) -> list[Chunk]:
    """Chunks of at most `chunk_size` tokens (by `count_tokens`), `overlap` tokens shared within a section."""
    if chunk_size <= 0:
        raise ValueError("chunk_size must be positive")
    if overlap < 0 or overlap * 2 > chunk_size:
        raise ValueError("overlap must be between 0 and half of chunk_size")
    counter = _Counter(count_tokens)
    budget = chunk_size - counter.specials
    if budget <= overlap:
        raise ValueError("chunk_size leaves no room for text after the tokenizer's special tokens")
    # Long sentences are cut to this, so that a carried overlap plus any piece fits in a chunk.
    piece_limit = max(1, budget - overlap - (OVERLAP_MARGIN if overlap else 0))
    chunks: list[Chunk] = []
    for section, blocks in _section_groups(parsed.blocks):
        pieces = _pieces(blocks, counter=counter, limit=piece_limit)
        for text, page, tokens in _pack(pieces, counter=counter, budget=budget, chunk_size=chunk_size, overlap=overlap):
            chunks.append(
                Chunk(text=text, chunk_index=len(chunks), page_number=page, section=section, token_count=tokens)
            )
    return chunks


def _section_groups(blocks: Iterable[TextBlock]) -> list[tuple[str | None, list[TextBlock]]]:
    """Runs of blocks with one section; a run holding only headings joins the run after it."""
    groups: list[tuple[str | None, list[TextBlock]]] = []
    for block in blocks:
        if not block.text.strip():
            continue
        if groups and groups[-1][0] == block.section and not (block.is_heading and _has_body(groups[-1][1])):
            groups[-1][1].append(block)
        else:
            groups.append((block.section, [block]))
    merged: list[tuple[str | None, list[TextBlock]]] = []
    pending: list[TextBlock] = []
    for section, group in groups:
        if not _has_body(group):
            pending.extend(group)  # "Chapter 2" directly followed by "2.1 Scope": one chunk
            continue
        merged.append((section, pending + group))
        pending = []
    if pending:
        merged.append((pending[-1].section, pending))
    return merged


def _has_body(blocks: list[TextBlock]) -> bool:
    return any(not block.is_heading for block in blocks)


def _pieces(blocks: list[TextBlock], *, counter: _Counter, limit: int) -> list[_Piece]:
    pieces: list[_Piece] = []
    for block in blocks:
        # a heading and a table row stay whole (a row's cells are not sentences)
        sentences = [block.text.strip()] if block.is_heading or block.is_row else split_sentences(block.text)
        joiner = "\n"  # a new block (paragraph, heading, table) starts on its own line
        for sentence in sentences:
            sentence = _normalise_space(sentence)
            if not sentence:
                continue
            tokens = counter.content(sentence)
            parts = [(sentence, tokens)] if tokens <= limit else _split_long(sentence, counter=counter, limit=limit)
            for text, count in parts:
                pieces.append(_Piece(text=text, tokens=count, page=block.page_number, joiner=joiner, row=block.is_row))
                joiner = " "
    return pieces


def _split_long(sentence: str, *, counter: _Counter, limit: int) -> list[tuple[str, int]]:
    """Word windows of at most `limit` tokens; a single word longer than that is cut by characters."""
    parts: list[tuple[str, int]] = []
    words: list[str] = []
    total = 0
    for word in sentence.split(" "):
        count = counter.word(word)
        if count > limit:
            if words:
                parts.append((" ".join(words), counter.content(" ".join(words))))
                words, total = [], 0
            parts.extend(_split_word(word, counter=counter, limit=limit))
            continue
        if words and total + count > limit:
            parts.append((" ".join(words), counter.content(" ".join(words))))
            words, total = [], 0
        words.append(word)
        total += count
    if words:
        parts.append((" ".join(words), counter.content(" ".join(words))))
    # joins can differ slightly from the sum of word counts; re-split anything still over
    fixed: list[tuple[str, int]] = []
    for text, count in parts:
        if count > limit and " " in text:
            middle = text.count(" ") // 2 + 1
            words = text.split(" ")
            for half in (" ".join(words[:middle]), " ".join(words[middle:])):
                fixed.extend(_split_long(half, counter=counter, limit=limit))
        else:
            fixed.append((text, count))
    return fixed


def _split_word(word: str, *, counter: _Counter, limit: int) -> list[tuple[str, int]]:
    parts = []
    while word:
        low, high = 1, len(word)
        while low < high:  # longest prefix within the limit
            middle = (low + high + 1) // 2
            if counter.content(word[:middle]) <= limit:
                low = middle
            else:
                high = middle - 1
        parts.append((word[:low], counter.content(word[:low])))
        word = word[low:]
    return parts


def _join(pieces: list[_Piece]) -> str:
    if not pieces:
        return ""
    return pieces[0].text + "".join(piece.joiner + piece.text for piece in pieces[1:])


def _pack(
    pieces: list[_Piece], *, counter: _Counter, budget: int, chunk_size: int, overlap: int
) -> Iterable[tuple[str, int | None, int]]:
    """Greedy packing of pieces into chunks; each chunk after the first starts with the overlap tail."""
    position = 0
    carry: list[_Piece] = []
    while position < len(pieces):
        current = list(carry)
        total = sum(piece.tokens for piece in current)
        start = position
        while position < len(pieces) and total + pieces[position].tokens <= budget:
            current.append(pieces[position])
            total += pieces[position].tokens
            position += 1
        if position == start:
            if carry:
                carry = []  # the overlap does not fit beside the next piece; drop it rather than overflow
                continue
            current.append(pieces[position])  # cannot happen with split pieces; never loop forever
            position += 1
        text = _join(current)
        tokens = counter.full(text)
        # The sum of piece counts can differ from the count of the joined text; trust the latter.
        while tokens > chunk_size and len(current) - len(carry) > 1:
            current.pop()
            position -= 1
            text = _join(current)
            tokens = counter.full(text)
        yield text, current[0].page, tokens
        carry = _overlap_tail(current, counter=counter, overlap=overlap) if position < len(pieces) else []


def _overlap_tail(pieces: list[_Piece], *, counter: _Counter, overlap: int) -> list[_Piece]:
    """The end of a chunk, about `overlap` tokens long, to open the next chunk with."""
    if overlap <= 0 or len(pieces) < 1:
        return []
    if pieces[-1].row:
        return _row_tail(pieces, overlap=overlap)
    # Whole sentences, when they come close enough to the setting.
    best_k, best_gap, total = 0, None, 0
    for k in range(1, len(pieces)):
        total += pieces[-k].tokens
        gap = abs(total - overlap)
        if best_gap is None or gap < best_gap:
            best_k, best_gap = k, gap
        if total > overlap + OVERLAP_SENTENCE_SLACK:
            break
    if best_gap is not None and best_gap <= OVERLAP_SENTENCE_SLACK:
        return [_Piece(text=p.text, tokens=p.tokens, page=p.page, joiner=p.joiner) for p in pieces[-best_k:]]
    # Otherwise whole words from the end of the chunk's text.
    text = _join(pieces)
    starts = _piece_starts(pieces)
    words = list(re.finditer(r"\S+", text))
    total, best_start, best_gap = 0, None, None
    for word in reversed(words[1:]):  # never the whole chunk
        total += counter.word(word.group(0))
        gap = abs(total - overlap)
        if best_gap is None or gap < best_gap:
            best_start, best_gap = word.start(), gap
        if total >= overlap:
            break
    if best_start is None:
        return []
    tail = text[best_start:]
    page = next(piece.page for offset, piece in reversed(list(zip(starts, pieces))) if offset <= best_start)
    return [_Piece(text=tail, tokens=counter.content(tail), page=page)]


def _row_tail(pieces: list[_Piece], *, overlap: int) -> list[_Piece]:
    """Whole trailing rows of a table, closest to `overlap` without passing it by more than the
    margin; none when a single row is longer (each row carries its header, so it needs no context)."""
    best_k, best_gap, total = 0, None, 0
    for k in range(1, len(pieces)):
        if not pieces[-k].row:
            break
        total += pieces[-k].tokens
        if total > overlap + OVERLAP_MARGIN:
            break
        gap = abs(total - overlap)
        if best_gap is None or gap < best_gap:
            best_k, best_gap = k, gap
    return list(pieces[-best_k:]) if best_k else []


def _piece_starts(pieces: list[_Piece]) -> list[int]:
    starts, offset = [], 0
    for index, piece in enumerate(pieces):
        if index:
            offset += len(piece.joiner)
        starts.append(offset)
        offset += len(piece.text)
    return starts
