""" "View as" shows each passage as the person's chat would: the one snippet rule of the core
(ragchat.services.citations.make_snippet), not a cut of its own."""

from access.view_as import _rows
from ragchat.services.citations import SNIPPET_CHARS, make_snippet
from ragchat.services.types import SearchResult


def test_view_as_rows_cut_passages_like_the_chat() -> None:
    long_text = "Vacation days carry over until March. " * 20
    short_text = "Badges open the side door."
    results = [
        SearchResult(document_id="d1", chunk_index=0, document_name="Leave", chunk_text=long_text, score=0.9),
        SearchResult(document_id="d2", chunk_index=0, document_name="Badges", chunk_text=short_text, score=0.8),
    ]
    long_row, short_row = _rows(results, tag_names={}, held=set())
    assert long_row.snippet == make_snippet(long_text)[0]
    assert long_row.snippet.endswith("...") and len(long_row.snippet) == SNIPPET_CHARS + 3
    assert short_row.snippet == short_text
