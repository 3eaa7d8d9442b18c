"""Glossary and acronym expansion of a search query (rag-standard-v1 vocab/query_expand; axiom A1:
the same corpus and configuration give the same top results, so the expansion is deterministic).

A glossary entry is a term with its aliases under a tag ("PTO": "paid time off", "vacation"). When
the query names an entry by any of its forms, the forms it does not already contain are appended
once, in parentheses, so that the embedding and the keyword search also meet documents that use
another name for the same thing:

    "How much PTO do I get?" -> "How much PTO do I get? (paid time off; vacation)"

Matching, per form (the term or an alias):
- whole words or whole phrases, case-insensitive: "art" does not match "start" or "artist";
  a phrase's words may be separated by any white space or a hyphen ("paid-time-off");
- a plural or possessive ending ("s", "'s") is allowed after the form: "VPNs", "PTO's";
- one exception to case-insensitivity: an acronym of two letters (written in capitals in the
  glossary: "IT", "HR", "US") matches only when the query writes it in capitals, since in
  lowercase it is usually an ordinary word ("it", "us", "or").

Order and bounds: the matched entries are sorted (term, tag, aliases), whatever order they come in;
each contributes its term, then its aliases in the order the glossary lists them; a form already in
the query, or already added, is skipped; at most MAX_ADDED_WORDS words are added (a form that would
exceed the budget is skipped).

References: docs/specs/rag-standard-v1.md (vocab.py, query_expand.py, A1).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

MAX_ADDED_WORDS = 12  # words an expansion may add to a query, all entries together
MAX_FORM_CHARS = 200  # a longer term or alias is ignored (it is not a name)

_ALIAS_SPLIT_RE = re.compile(r"[;\n\r]+")
_SPACE_RE = re.compile(r"\s+")
_SEPARATOR = r"[\s\-]+"
_ENDING = r"(?:['’]s|s)?"


@dataclass(frozen=True)
class GlossaryEntry:
    """A term, its aliases (other names, spellings, acronyms) and the slug of the tag it belongs to."""

    term: str
    aliases: tuple[str, ...] = ()
    tag: str = ""

    def forms(self) -> tuple[str, ...]:
        """The term, then the aliases, cleaned (white space collapsed), empty and repeated ones out."""
        return _unique(_clean(f) for f in (self.term, *self.aliases))


def _clean(form: str) -> str:
    return _SPACE_RE.sub(" ", form or "").strip()


def _unique(forms: Iterable[str]) -> tuple[str, ...]:
    seen: set[str] = set()
    out: list[str] = []
    for form in forms:
        key = form.casefold()
        if form and len(form) <= MAX_FORM_CHARS and key not in seen:
            seen.add(key)
            out.append(form)
    return tuple(out)


def parse_aliases(text: str) -> tuple[str, ...]:
    """Aliases as an admin writes them: one per line or separated by ";" (cleaned, first of each kept)."""
    return _unique(_clean(part) for part in _ALIAS_SPLIT_RE.split(text or ""))


def _is_short_acronym(form: str) -> bool:
    return len(form) == 2 and form.isalpha() and form.isupper()


@lru_cache(maxsize=4096)
def _pattern(form: str) -> re.Pattern[str]:
    words = [re.escape(w) for w in re.split(_SEPARATOR, form) if w]
    body = _SEPARATOR.join(words)
    flags = 0 if _is_short_acronym(form) else re.IGNORECASE
    return re.compile(rf"(?<!\w){body}{_ENDING}(?!\w)", flags)


def mentions(query: str, form: str) -> bool:
    """Whether the query names `form` (a term or an alias) by the matching rules above."""
    form = _clean(form)
    return bool(form) and _pattern(form).search(query or "") is not None


def _sort_key(entry: GlossaryEntry) -> tuple:
    forms = entry.forms()
    return (
        tuple(f.casefold() for f in forms),
        forms,
        entry.tag,
    )


def expand_query(query: str, entries: Sequence[GlossaryEntry]) -> tuple[str, list[str]]:
    """The query to embed and search (the query, plus the missing forms of every entry it names)
    and the sorted list of the matched entries' terms (each once, whatever its case). Without a
    match, or with nothing missing, the query is returned as is."""
    if not query or not query.strip():
        return query, []
    matched = [
        e for e in sorted(entries, key=_sort_key) if _clean(e.term) and any(mentions(query, f) for f in e.forms())
    ]
    if not matched:
        return query, []
    terms: list[str] = []
    for term in sorted({e.forms()[0] for e in matched}, key=lambda t: (t.casefold(), t)):
        if not terms or terms[-1].casefold() != term.casefold():
            terms.append(term)  # one spelling per term ("PTO" under two tags counts once)
    added: list[str] = []
    budget = MAX_ADDED_WORDS
    for entry in matched:
        for form in entry.forms():
            words = len(form.split())
            if words > budget or mentions(query, form) or any(a.casefold() == form.casefold() for a in added):
                continue
            added.append(form)
            budget -= words
    if not added:
        return query, terms
    return f"{query.rstrip()} ({'; '.join(added)})", terms


# --- The glossary CSV (the admin's import and export, and `manage.py evaluate`'s glossary.csv)

GLOSSARY_CSV_COLUMNS = ("tag", "term", "aliases", "note")
# A cell a spreadsheet would run as a formula (OWASP "CSV injection") is written with a leading "'".
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def guard_csv_cell(cell: str) -> str:
    """A cell a spreadsheet will not run as a formula (any CSV export of text people typed)."""
    return "'" + cell if cell.startswith(_FORMULA_START) else cell


@dataclass(frozen=True)
class GlossaryRow:
    """One row of a glossary CSV: its line number, the tag as written (slug or name), the term
    and aliases cleaned, and the note (None when the file has no note column)."""

    line: int
    tag: str
    term: str
    aliases: tuple[str, ...]
    note: str | None


def _unguard(cell: str) -> str:
    return cell[1:] if cell.startswith("'") and cell[1:2] and cell[1] in _FORMULA_START else cell


def csv_header_ok(text: str) -> bool:
    """The first row names the tag and term columns (any case, any order); raises csv.Error if the
    text is not CSV."""
    import csv
    import io

    header = next(csv.reader(io.StringIO(text)), [])
    return {"tag", "term"} <= {c.strip().lower() for c in header}


class GlossaryCSVError(ValueError):
    """The file stops being CSV at `line` (the rows before it were read)."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: not CSV ({reason})")
        self.line = line


def read_glossary_csv(text: str) -> Iterable[GlossaryRow]:
    """The rows of a glossary CSV (header tag, term, aliases[, note]; aliases separated by ";"),
    blank lines skipped. Where the file stops being CSV, GlossaryCSVError names the line."""
    import csv
    import io

    reader = csv.DictReader(io.StringIO(text))
    try:
        reader.fieldnames = [(c or "").strip().lower() for c in reader.fieldnames or []]
        for row in reader:
            cells = {k: _unguard(v) for k, v in row.items() if isinstance(k, str) and isinstance(v, str)}
            if not any(v.strip() for v in cells.values()):
                continue
            note = cells.get("note")
            yield GlossaryRow(
                line=reader.line_num,
                tag=_clean(cells.get("tag", "")),
                term=_clean(cells.get("term", "")),
                aliases=parse_aliases(cells.get("aliases", "")),
                note=None if note is None else note.strip(),
            )
    except csv.Error as e:
        raise GlossaryCSVError(reader.line_num + 1, str(e)) from e  # the line it could not read


def write_glossary_csv(rows: Iterable[tuple[str, str, Sequence[str], str]]) -> str:
    """(tag slug, term, aliases, note) rows as the CSV the import reads, formula-like cells guarded."""
    import csv
    import io

    guard = guard_csv_cell
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(GLOSSARY_CSV_COLUMNS)
    for tag, term, aliases, note in rows:
        writer.writerow([guard(tag), guard(term), guard("; ".join(aliases)), guard(note)])
    return out.getvalue()


def entries_from_csv(text: str) -> list[GlossaryEntry]:
    """Entries from a glossary CSV kept next to a folder of documents (`manage.py evaluate`); rows
    without a term are skipped; the tag column holds the tag's slug."""
    return [GlossaryEntry(term=r.term, aliases=r.aliases, tag=r.tag) for r in read_glossary_csv(text) if r.term]
