"""Citations that do not depend on the model's habits: a sentence that a passage of the prompt
supports, but that cites no passage supporting it, gets that passage's citation attached by ragchat.

Many models write no citation markers at all (a 0.5B instruction-tuned model cited none of 24
answers), others cite now and then. The per-sentence grounding check (grounding.py) already knows
which passage holds each sentence's words, figures, names and negation: when it finds a sentence
"uncited" (supported by a passage it does not cite), the passage is attached as
"[SourceId: <id>; attributed]" where the prompt asks the model to put its own: before the
sentence's end mark ("… 25 days [SourceId: …; attributed]."), or after the model's markers there.
The model's own citations are kept as they are; a sentence no passage supports ("unsupported"),
or one that states nothing, never gets one. Everything downstream reads the attributed form as a
citation (types.SOURCEID_PATTERN) and can tell it apart (types.ATTRIBUTED_PATTERN): the stored
message, the chat page's marker and card, the API's `citations`/`citation_map` and the grounding
report.

While the answer streams, a sentence gets its marker as soon as it is known to have ended (the
next sentence starts, or the line ends); the end mark and white space of a sentence that may still
be ending are held back meanwhile, so the pieces given out are only ever appended to, and they
join to `attribute_citations` of the whole answer.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from .citations import attributed_marker
from .grounding import SENTENCE_END_RE, check_sentence, cited_in, index_chunks, markers_lead, split_sentences
from .types import SearchResult

logger = logging.getLogger(__name__)

_END_MARK_RE = re.compile(r"[.!?…]+$")
# The model's markers after a sentence's end mark ("… per year. [SourceId: …]").
_TRAILING_MARKERS_RE = re.compile(r"(?:[ \t]*\[\s*SourceId\s*:[^\]\n]*\])+[ \t]*$", re.IGNORECASE)
# How far before a new piece a sentence end it completes may begin (an end mark, closing quotes and
# the model's markers after it).
_LOOK_BACK = 1000
_END_CHARS = ".!?…\n"


def _marker_point(sentence: str) -> int:
    """Where in a sentence its citation goes: before the end mark it closes with (markers of the
    model after that mark stay after it), else at its end."""
    markers = _TRAILING_MARKERS_RE.search(sentence)
    end_mark = _END_MARK_RE.search(sentence, 0, markers.start() if markers else len(sentence))
    return end_mark.start() if end_mark else len(sentence)


def attribute_citations(answer: str, chunks: Sequence[SearchResult]) -> str:
    """The answer with an attributed citation after every sentence that a passage of `chunks`
    supports and that cites no supporting passage itself."""
    attributor = CitationAttributor(chunks)
    return attributor.feed(answer) + attributor.finish()


class CitationAttributor:
    """`attribute_citations` for a stream: `feed` each piece (already normalised by
    citations.CitationNormalizer), `finish` once; the pieces returned join to the cited answer."""

    def __init__(self, chunks: Sequence[SearchResult]) -> None:
        self._index = index_chunks(chunks)
        self._text = ""  # everything received, with the markers attached so far
        self._given = 0  # how much of _text was given out
        self._checked = 0  # the sentences ending before this offset of _text are checked
        self._open = True  # the text ends in a sentence that may go on (or nothing yet)
        self.attached = 0  # markers attached so far
        # Whether markers open their sentences (grounding.markers_lead): the whole answer's style,
        # known from its first marker on; the text before `_style_scanned` holds none.
        self._lead: bool | None = None
        self._style_scanned = 0

    @property
    def text(self) -> str:
        """Everything given out so far."""
        return self._text[: self._given]

    def feed(self, piece: str) -> str:
        before = len(self._text)
        self._text += piece
        if not self._ends_a_sentence(before):
            # Nothing ended: the open sentence (or code) only grew, and goes out up to its end, or
            # whole. Splitting the unchecked text again on every piece would cost the length of a
            # long sentence or code block per piece.
            hold = len(self._text)
            if self._open:  # without the white space after it: a marker may go there
                while hold > self._given and self._text[hold - 1].isspace():
                    hold -= 1
            return self._give(hold)
        return self._advance(final=False)

    def _ends_a_sentence(self, before: int) -> bool:
        """Whether the text that came after `before` may end a sentence (or a line): a sentence end
        at or after the last word before it (what follows an end mark decides whether it is one)."""
        text = self._text
        words_end = before
        while words_end > self._checked and text[words_end - 1].isspace():
            words_end -= 1
        if SENTENCE_END_RE.search(text, words_end) is not None:
            return True
        # An end mark before it counts if only closing quotes or markers lie between (none of
        # which holds an end mark): the last one is the one to try.
        start = max(self._checked, words_end - _LOOK_BACK)
        last = max(text.rfind(mark, start, words_end) for mark in _END_CHARS)
        if last < 0:
            return False
        found = SENTENCE_END_RE.match(text, last)
        return found is not None and found.end() >= words_end

    def finish(self, *, complete: bool = True) -> str:
        """The rest. `complete` False (the model stopped mid-answer): the last sentence, perhaps
        cut off, is given out as it is, unchecked."""
        piece = self._advance(final=complete)
        rest, self._given = self._text[self._given :], len(self._text)
        return piece + rest

    def _advance(self, *, final: bool) -> str:
        base = self._checked
        tail = self._text[base:]
        spans = split_sentences(tail, leading=self._leading())
        hold = len(self._text)
        ended: list[tuple[int, int]] = []
        self._open = False
        for i, (start, end) in enumerate(spans):
            rest = tail[end:]
            if final or i < len(spans) - 1 or "\n" in rest or rest.strip():
                ended.append((start, end))
            else:  # the last sentence may go on, or a marker of the model may follow its end mark
                hold = base + start + _marker_point(tail[start:end])
                self._open = True
        inserts: list[tuple[int, str]] = []
        for start, end in ended:
            sentence = tail[start:end]
            status, by, _, _ = check_sentence(sentence, self._index, cited_in(sentence))
            if status == "uncited" and by is not None:
                at = base + start + _marker_point(sentence)
                if at < self._given:  # never expected: what was given out stays as it was
                    logger.warning("attribution point already streamed", extra={"event": "attribution_late"})
                    continue
                inserts.append((at, " " + attributed_marker(by)))
        for at, marker in reversed(inserts):
            self._text = self._text[:at] + marker + self._text[at:]
            if hold >= at:
                hold += len(marker)
        self.attached += len(inserts)
        if ended:
            self._checked = base + ended[-1][1] + sum(len(m) for _, m in inserts)
        return self._give(hold)

    def _leading(self) -> bool:
        if self._lead is None:
            # A marker may have begun before the text scanned last time ended.
            self._lead = markers_lead(self._text, max(0, self._style_scanned - _LOOK_BACK))
            self._style_scanned = len(self._text)
        return bool(self._lead)

    def _give(self, hold: int) -> str:
        hold = max(hold, self._given)
        piece = self._text[self._given : hold]
        self._given = hold
        return piece
