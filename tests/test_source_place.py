"""How a passage's place in its document is named to a reader: only what is known (no "N/A")."""

from __future__ import annotations

from django.template import Context, Template

from ragchat.services.types import SearchResult
from ragchat.templatetags.sources import source_place


def test_only_what_is_known_is_said():
    assert source_place({"page_number": 2, "section": "Leave"}) == "Page 2 · Leave"
    assert source_place({"page_number": None, "section": "Leave"}) == "Leave"
    assert source_place({"page_number": 3, "section": ""}) == "Page 3"
    assert source_place({"page_number": "N/A", "section": "N/A"}) == ""  # the prompt's format, stored
    result = SearchResult(
        document_id="d", chunk_index=0, document_name="x.md", chunk_text="t", score=0.5, section="Intro"
    )
    assert source_place(result) == "Intro"


def test_the_filter_escapes_a_section_it_is_given():
    html = Template("{% load sources %}{{ s|source_place }}").render(Context({"s": {"section": "<b>x</b>"}}))
    assert html == "&lt;b&gt;x&lt;/b&gt;"
