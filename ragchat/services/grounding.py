"""Grounding per sentence (rag-standard-v1 axiom A2: every answer sentence is supported by at least
one cited chunk), checked after generation, deterministically and without a model.

The answer is cut into sentences (a citation marker right after a sentence's full stop belongs to
that sentence). A sentence that states something (a "claim": at least MIN_CLAIM_TERMS content words
or a number) is compared with the chunks it cites, then with the other chunks the prompt held:

- its content words (lowercased, stopwords out, a light stem so "employees get" meets "employee
  gets", number words as digits) must be found in one chunk for at least SUPPORT_THRESHOLD of them;
- every number it states must occur in that same chunk (a changed figure is the most common and
  the most harmful invention), and so must every name or code it states (a capitalised word other
  than the first, an all-capitals word, a word mixing letters and digits: "Cisco", "HR", "SEV3"),
  and so must a negation ("not", "never", "no"): a sentence that denies what the passage states
  reuses all its words.

Statuses: "supported" (by a chunk it cites), "uncited" (by a chunk of the prompt it does not cite:
the content is grounded, the citation is missing), "unsupported" (by no chunk), "none" (no claim:
"Here is what I found:", a question back, the model's fixed not-enough-information sentence). The
answer the pipeline stores has no "uncited" sentence: attribution.py attaches the supporting
chunk's citation, marked as ragchat's, while the answer streams (`attributed` names those).

Measured on a labelled set (ragchat/evaluation/grounding_set.py, reported by `manage.py evaluate`).
A lexical check cannot see a negation or a swapped relation that reuses the passage's own words;
those are its known misses.

References: docs/specs/rag-standard-v1.md (A2).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from .citations import strip_source_ids
from .confidence import STOPWORDS
from .prompts import MODEL_INSUFFICIENT_SENTENCE
from .types import ATTRIBUTED_PATTERN, SOURCEID_PATTERN, SearchResult

Status = Literal["supported", "uncited", "unsupported", "none"]

SUPPORT_THRESHOLD = 0.6  # share of a sentence's content words one chunk must hold
# A sentence whose figures or names the chunk all holds needs fewer of its other words there: the
# facts anchor it, the rest may be paraphrase ("the minimum length is 14" of "at least 14").
ANCHORED_SUPPORT_THRESHOLD = 0.5
MIN_CLAIM_TERMS = 2  # fewer content words (and no number) is not a claim

_SOURCEID_RE = re.compile(SOURCEID_PATTERN)
_ATTRIBUTED_RE = re.compile(ATTRIBUTED_PATTERN)
_MARKER = r"\[\s*SourceId\s*:[^\]\n]*\]"
_MARKER_RE = re.compile(_MARKER, re.IGNORECASE)
# A sentence ends at . ! ? (with closing quotes or brackets, and any citation markers right after),
# followed by white space or the end; or at a line break (list items, paragraphs, headings).
_END_RE = re.compile(rf"[.!?…]+[\"'”’)\]]*(?:[ \t]*{_MARKER})*(?=\s|$)|\n+", re.IGNORECASE)
SENTENCE_END_RE = _END_RE  # where a sentence may end (split_sentences decides; attribution.py looks ahead)
# An answer that writes its citations at the start of the sentences they support ("[1] Every
# employee … . [2] Unused days …"): markers after an end mark open the next sentence, unless
# nothing follows them on their line.
_END_LEADING_RE = re.compile(
    rf"[.!?…]+[\"'”’)\]]*(?:(?:[ \t]*{_MARKER})+(?=[ \t]*(?:\n|$)))?(?=\s|$)|\n+", re.IGNORECASE
)
# The style shows in the answer's first marker: it opens a line (a list item's bullet before it).
_FIRST_MARKER_RE = re.compile(_MARKER, re.IGNORECASE)
_LINE_START_RE = re.compile(r"(?:^|\n)[ \t]*(?:(?:[-*+>]|\d{1,9}[.)])[ \t]+)*$")


def markers_lead(text: str, start: int = 0) -> bool | None:
    """Whether the answer writes its citation markers in front of the sentences they support: its
    first marker (at or after `start`) opens a line. None: it has no marker (yet)."""
    first = _FIRST_MARKER_RE.search(text, start)
    if first is None:
        return None
    return _LINE_START_RE.search(text, max(0, first.start() - 200), first.start()) is not None


_ABBREVIATIONS = {
    "e.g", "i.e", "etc", "vs", "dr", "mr", "mrs", "ms", "no", "nr", "approx", "incl", "fig", "p", "pp",
    "st", "ca", "cf", "dept", "max", "min", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep",
    "sept", "oct", "nov", "dec", "inc", "ltd", "co", "art", "sec", "para",
}  # fmt: skip
_WORD_RE = re.compile(r"[a-z][a-z0-9'’-]*[a-z0-9]|[a-z]")
_NUMBER_RE = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?:st|nd|rd|th)?")
_NUMBER_WORDS = {
    "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "thirteen": "13",
    "fourteen": "14", "fifteen": "15", "sixteen": "16", "seventeen": "17", "eighteen": "18",
    "nineteen": "19", "twenty": "20", "thirty": "30", "forty": "40", "fifty": "50", "sixty": "60",
    "ninety": "90", "hundred": "100", "dozen": "12",
}  # fmt: skip
# Words that carry no claim of their own in an answer ("according to the policy", "the document says").
_ANSWER_NOISE = STOPWORDS | {
    "according", "document", "documents", "policy", "source", "sources", "states", "state", "says",
    "said", "mentions", "mentioned", "also", "however", "therefore", "thus", "yes", "note", "based",
    "information", "available", "provided", "context", "section", "please", "per", "within", "which",
    "what", "who", "whom", "whose", "any", "get", "gets", "got", "make", "made", "must", "can", "will",
    "may", "one", "ones", "two", "there", "their", "about", "out", "over", "up", "down", "off",
}  # fmt: skip


@dataclass(frozen=True)
class SentenceGrounding:
    start: int  # offsets into the answer text, end exclusive
    end: int
    text: str
    status: Status
    cited: tuple[str, ...] = ()  # SourceIds the sentence cites
    supported_by: str | None = None  # the chunk that supports it best (a SourceId)
    score: float = 0.0  # share of its content words in that chunk
    missing_facts: tuple[str, ...] = ()
    attributed: tuple[str, ...] = ()  # those of `cited` that ragchat attached, not the model

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["cited"] = list(self.cited)
        out["missing_facts"] = list(self.missing_facts)
        out["attributed"] = list(self.attributed)
        return out


@dataclass(frozen=True)
class GroundingReport:
    sentences: tuple[SentenceGrounding, ...] = field(default_factory=tuple)

    @property
    def claims(self) -> int:
        return sum(1 for s in self.sentences if s.status != "none")

    @property
    def supported(self) -> int:
        """Claims whose content one of the prompt's chunks holds (cited or not)."""
        return sum(1 for s in self.sentences if s.status in ("supported", "uncited"))

    @property
    def cited_supported(self) -> int:
        """Claims supported by a chunk they cite (A2 as written)."""
        return sum(1 for s in self.sentences if s.status == "supported")

    @property
    def attributed(self) -> int:
        """Claims whose only citations ragchat attached (the model cited none of them)."""
        return sum(1 for s in self.sentences if s.attributed and set(s.attributed) == set(s.cited))

    @property
    def supported_share(self) -> float | None:
        """Share of claims supported by the prompt's chunks; None when the answer states nothing."""
        return self.supported / self.claims if self.claims else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "claims": self.claims,
            "supported": self.supported,
            "cited_supported": self.cited_supported,
            "attributed": self.attributed,
            "supported_share": self.supported_share,
            "sentences": [s.as_dict() for s in self.sentences],
        }


# A fenced code block (``` or ~~~, to its closing fence or the end) is code, not claims in prose.
_FENCED_CODE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})[^\n]*\n.*?(?:^ {0,3}\1[ \t]*$|\Z)", re.MULTILINE | re.DOTALL)


def split_sentences(text: str, *, leading: bool | None = None) -> list[tuple[int, int]]:
    """(start, end) of each sentence of `text`, surrounding white space excluded; fenced code blocks
    hold no sentences. `leading`: the answer writes its markers in front of its sentences (None:
    `markers_lead(text)` says)."""
    end_re = _END_LEADING_RE if (markers_lead(text) if leading is None else leading) else _END_RE
    spans: list[tuple[int, int]] = []
    start = 0
    for code in _FENCED_CODE_RE.finditer(text):
        spans += [(start + a, start + b) for a, b in _prose_sentences(text[start : code.start()], end_re)]
        start = code.end()
    spans += [(start + a, start + b) for a, b in _prose_sentences(text[start:], end_re)]
    return spans


def _prose_sentences(text: str, end_re: re.Pattern[str]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = 0
    for match in end_re.finditer(text):
        end = match.start() if match.group().startswith("\n") else match.end()
        if not match.group().startswith("\n") and (
            _is_abbreviation(text[start : match.start() + 1])
            or _LIST_NUMBER_RE.fullmatch(text[start : match.end()].strip()) is not None
        ):
            continue
        _add_span(text, start, end, spans)
        start = match.end()
    _add_span(text, start, len(text), spans)
    return spans


_LIST_NUMBER_RE = re.compile(r"(?:[-*+>][ \t]+)*\d{1,9}[.)]")


def _is_abbreviation(piece: str) -> bool:
    """The full stop ends "e.g.", "Dr.", "No." or a single initial ("J."), not a sentence."""
    if not piece.endswith("."):
        return False
    words = piece[:-1].split()
    if not words:
        return False
    last = words[-1].lower().lstrip("([\"'")
    return last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha() and words[-1][-1].isupper())


# Markdown that opens a line (a list bullet or number, a heading, a quote) is not part of the sentence.
_BLOCK_PREFIX_RE = re.compile(r"(?:[ \t]*(?:[-*+]|\d{1,9}[.)]|#{1,6}|>)[ \t]+)+")


def _add_span(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> None:
    piece = text[start:end]
    stripped = piece.strip()
    if not stripped:
        return
    lead = len(piece) - len(piece.lstrip())
    prefix = _BLOCK_PREFIX_RE.match(stripped)
    if prefix is not None and (start + lead == 0 or text[start + lead - 1] == "\n"):
        lead += prefix.end()
        stripped = stripped[prefix.end() :]
        if not stripped:
            return
    spans.append((start + lead, start + lead + len(stripped)))


def _stem(word: str) -> str:
    word = word.replace("’", "'")
    if word.endswith("'s"):
        word = word[:-2]
    for suffix, keep in (("ies", "y"), ("ied", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: -len(suffix)] + keep
    return word


def figures_in(text: str) -> set[str]:
    """The figures a text states (digits and number words, as digits), citation markers aside."""
    return _numbers(_plain(text))


def _numbers(text: str) -> set[str]:
    found = {m.group().replace(",", "").rstrip("stndrh") or m.group() for m in _NUMBER_RE.finditer(text)}
    for word in _WORD_RE.findall(text.lower()):
        if word in _NUMBER_WORDS:
            found.add(_NUMBER_WORDS[word])
        elif "-" in word and all(part in _NUMBER_WORDS for part in word.split("-")):
            found.add(str(sum(int(_NUMBER_WORDS[part]) for part in word.split("-"))))  # twenty-eight
    return found


_NAME_RE = re.compile(r"[A-Za-z0-9][\w&'’-]*")
_NOT_NAMES = {"i", "i'm", "i’m", "ok"}
_NEGATIONS = {"not", "no", "never", "cannot", "none", "nor", "neither", "nobody", "nothing"}
_NEGATION_RE = re.compile(r"\b(?:" + "|".join(sorted(_NEGATIONS)) + r")\b|n['’]t\b", re.IGNORECASE)


def _negated(text: str) -> bool:
    return _NEGATION_RE.search(text) is not None


def _word_form(word: str) -> str:
    """A word as names and codes are compared: lowercased, without a possessive 's and without
    hyphens ("Wi-Fi" and "WiFi", "e-mail" and "email" are one word)."""
    return word.lower().replace("’", "'").removesuffix("'s").replace("-", "")


def _names(text: str) -> set[str]:
    """Names and codes a sentence states, lowercased: capitalised words after the first, words in
    capitals, words mixing letters and digits."""
    words = _NAME_RE.findall(text)
    found = set()
    for i, word in enumerate(words):
        has_digit = any(ch.isdigit() for ch in word)
        has_alpha = any(ch.isalpha() for ch in word)
        if (has_digit and has_alpha) or (word.isupper() and len(word) >= 2) or (i > 0 and word[0].isupper()):
            found.add(_word_form(word))
    return found - _NOT_NAMES


# A bracketed number left in the text ("per year[7]", "【3】"): a reference that names no passage
# of the prompt, or an index; no figure the sentence states.
_BRACKETED_NUMBER_RE = re.compile(r"[\[【［]\s*\d{1,3}\s*[\]】］]")


def _plain(text: str) -> str:
    """The words of a sentence without citation markers and Markdown punctuation."""
    text = _BRACKETED_NUMBER_RE.sub(" ", _MARKER_RE.sub(" ", text))
    return re.sub(r"[*_`#>|~]+", " ", text)


def content_terms(text: str) -> set[str]:
    words = _WORD_RE.findall(_plain(text).lower())
    return {
        _stem(w.replace("-", "")) for w in words if w not in _ANSWER_NOISE and w not in _NUMBER_WORDS and len(w) >= 3
    }


@dataclass
class _Chunk:
    source_id: str
    terms: set[str]
    numbers: set[str]
    words: set[str]  # every word, lowercased, for names and codes
    negated: bool


def index_chunks(chunks: Sequence[SearchResult]) -> list[_Chunk]:
    """The prompt's chunks as check_sentence compares them."""
    out = []
    for c in chunks:
        text = f"{c.chunk_text}\n{c.document_name}\n{c.section or ''}"
        words = {_word_form(w) for w in _NAME_RE.findall(text)}
        out.append(_Chunk(c.source_id, content_terms(text), _numbers(c.chunk_text), words, _negated(c.chunk_text)))
    return out


_NO_CHUNK = _Chunk("", set(), set(), set(), False)


def _support(terms: set[str], facts: tuple[set[str], set[str], bool], chunk: _Chunk) -> tuple[float, tuple[str, ...]]:
    numbers, names, negated = facts
    score = len(terms & chunk.terms) / len(terms) if terms else 1.0
    missing = sorted((numbers - chunk.numbers) | (names - chunk.words))
    if negated and not chunk.negated:
        missing.append("not")
    return score, tuple(missing)


def check_sentence(
    text: str, chunks: Sequence[_Chunk], cited: Sequence[str]
) -> tuple[Status, str | None, float, tuple[str, ...]]:
    plain = _plain(text).strip()
    if plain.endswith("?") or MODEL_INSUFFICIENT_SENTENCE.rstrip(".").lower() in plain.lower():
        return "none", None, 0.0, ()
    terms = content_terms(text)
    numbers = _numbers(_plain(text))
    if len(terms) < MIN_CLAIM_TERMS and not numbers:
        return "none", None, 0.0, ()
    if plain.endswith(":") and not numbers:
        return "none", None, 0.0, ()  # a lead-in ("Run this to see your days:") introduces, not states
    names = _names(_plain(text))
    negated = _negated(_plain(text))
    facts = (numbers, names, negated)
    best: tuple[float, str | None, tuple[str, ...]] = (0.0, None, _support(terms, facts, _NO_CHUNK)[1])
    # Cited chunks first: a sentence supported by what it cites is "supported" even if another
    # chunk would match it better.
    order = sorted(chunks, key=lambda c: c.source_id not in cited)
    for chunk in order:
        score, missing = _support(terms, facts, chunk)
        ok = not missing and (
            score >= SUPPORT_THRESHOLD or (score >= ANCHORED_SUPPORT_THRESHOLD and bool(numbers or names))
        )
        if ok:
            return ("supported" if chunk.source_id in cited else "uncited"), chunk.source_id, score, ()
        # The closest chunk: fewest missing facts, then most words.
        if best[1] is None or (-len(missing), score) > (-len(best[2]), best[0]):
            best = (score, chunk.source_id, missing)
    return "unsupported", best[1], best[0], best[2]


def cited_in(sentence: str) -> tuple[str, ...]:
    """The SourceIds a sentence cites (the model's and attributed ones), in order, without repeats."""
    return tuple(dict.fromkeys(_SOURCEID_RE.findall(sentence)))


def check_answer(answer: str, chunks: Sequence[SearchResult]) -> GroundingReport:
    """Every sentence of the answer checked against the prompt's chunks (A2)."""
    index = index_chunks(chunks)
    sentences: list[SentenceGrounding] = []
    for start, end in split_sentences(answer):
        text = answer[start:end]
        cited = cited_in(text)
        by_model = {m.group(1) for m in _SOURCEID_RE.finditer(text) if not _ATTRIBUTED_RE.fullmatch(m.group())}
        status, by, score, missing = check_sentence(text, index, cited)
        sentences.append(
            SentenceGrounding(
                start=start,
                end=end,
                text=re.sub(r"\s+([.,;:!?])", r"\1", _MARKER_RE.sub("", text)).strip(),
                status=status,
                cited=cited,
                supported_by=by,
                score=round(score, 3),
                missing_facts=missing,
                attributed=tuple(c for c in cited if c not in by_model),
            )
        )
    return GroundingReport(tuple(sentences))


# Questions whose answer is a figure: an amount, a count, a duration, a frequency, a time.
_ASKS_FOR_FIGURE_RE = re.compile(
    r"\b(how (many|much|long|often|soon|quickly|large|big|far|old)|within how|up to what|by what time)\b",
    re.IGNORECASE,
)
# Figures written without digits or number words.
_FIGURE_WORDS_RE = re.compile(
    r"\b(an?|half an?|a few) (minute|hour|day|week|month|quarter|year)s?\b"
    r"|\b(once|twice|immediately|daily|weekly|fortnightly|monthly|quarterly|annually|yearly|noon|midnight)\b"
    r"|\bevery (day|week|month|quarter|year|night|morning|evening)\b",
    re.IGNORECASE,
)


def answers_with_a_figure(question: str, answer: str) -> bool:
    """False when the question asks how many, how much, how long… and the answer states no figure
    (no digits, number words or "an hour", "weekly"…): it answers something else."""
    if not _ASKS_FOR_FIGURE_RE.search(question):
        return True
    return bool(figures_in(answer)) or bool(_FIGURE_WORDS_RE.search(strip_source_ids(answer)))
