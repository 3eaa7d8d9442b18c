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
from .types import SOURCEID_PATTERN, Citation, SearchResult

logger = logging.getLogger(__name__)

SNIPPET_CHARS = 200
SNIPPET_FULL_CHARS = 1000

_SOURCEID_RE = re.compile(SOURCEID_PATTERN)
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
    (a hallucinated or budget-dropped one) is logged and left out.
    """
    by_id = {r.source_id: r for r in results}
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
        citations.append(citation_from_result(result))
    return citations
