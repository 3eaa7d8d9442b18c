"""Answer rendering: sanitised Markdown, numbered markers by first use, unknown markers dropped."""

import pytest

from chat.rendering import markdown_to_html, render_answer

DOC = "3f1c2a4e-8b7d-4c6e-9a1b-2d3e4f5a6b7c"


def source(i: int) -> dict:
    return {
        "source_id": f"{DOC}:{i}",
        "document_id": DOC,
        "document_name": f"Doc {i}",
        "chunk_index": i,
        "page_number": None,
        "section": None,
        "relevance_score": 0.5,
        "snippet": "s" * 10,
        "snippet_full": "s" * 10,
    }


@pytest.mark.parametrize(
    ("markdown", "absent"),
    [
        ("<script>alert(1)</script>", "<script"),
        ("![x](https://evil.example/t.png)", "<img"),
        ("<img src=x onerror=alert(1)>", "<img"),
        ("[click](javascript:alert(1))", 'href="javascript'),
        ('<a href="https://x.example" onclick="steal()">x</a>', "<a "),  # raw HTML stays text
    ],
)
def test_markdown_is_sanitised(markdown, absent):
    assert absent not in markdown_to_html(markdown)


def test_links_are_safe(settings):
    settings.RAG_ALLOWLIST_DOMAINS = ["example.com"]
    html = markdown_to_html("[docs](https://help.example.com/a)")
    assert 'href="https://help.example.com/a"' in html and "noopener" in html and "nofollow" in html
    assert 'href="/documents/1/"' in markdown_to_html("[page](/documents/1/)")
    assert 'href="mailto:it@example.com"' in markdown_to_html("[mail](mailto:it@example.com)")


@pytest.mark.parametrize(
    "markdown",
    [
        "[verify your account](https://evil.example/login?d=secret)",
        "[x](HTTPS://EVIL.EXAMPLE/)",
        "[x](//evil.example/x)",
        "<https://evil.example/auto>",
        "[x](https://example.com.evil.example/)",
    ],
)
def test_links_to_outside_addresses_lose_their_address(settings, markdown):
    """A document may tell the model to add a link: the answer keeps the words, not the address."""
    settings.RAG_ALLOWLIST_DOMAINS = ["example.com"]
    html = markdown_to_html(markdown)
    assert "href" not in html and "evil.example/" not in html.split(">", 1)[0]


def test_markers_numbered_by_first_use_unknown_and_malformed_dropped():
    text = (
        f"B [SourceId: {DOC}:2] A [SourceId: {DOC}:1] again [SourceId: {DOC}:2] "
        f"ghost [SourceId: {DOC}:9] bad [SourceId: nope:1] end"
    )
    rendered = render_answer(text, known=[source(1), source(2)], prefix="m1")
    assert [s["source_id"] for s in rendered.sources] == [f"{DOC}:2", f"{DOC}:1"]
    assert [s["n"] for s in rendered.sources] == [1, 2]
    assert "SourceId" not in rendered.html and "ghost bad end" in rendered.html
    assert rendered.html.count('class="cite-marker"') == 3


def test_streaming_hides_a_half_written_marker():
    rendered = render_answer(f"Text [SourceId: {DOC[:8]}", known=[source(1)], prefix="m1", streaming=True)
    assert "[" not in rendered.html and "Text" in rendered.html


@pytest.mark.parametrize("punctuation", [".", ",", "!", "?", ":", ")"])
def test_bold_ending_in_punctuation_right_before_a_marker_stays_bold(punctuation):
    rendered = render_answer(
        f"You get **25 days{punctuation}**[SourceId: {DOC}:1] more.", known=[source(1)], prefix="m1"
    )
    assert f"<strong>25 days{punctuation}</strong>" in rendered.html and "**" not in rendered.html


@pytest.mark.parametrize(
    ("draft", "shown"),
    [
        ("Employees get **25 da", "<strong>25 da</strong>"),
        ("Use __the por", "<strong>the por</strong>"),
        ("Run `make te", "<code>make te</code>"),
        ("Done **twice** and **agai", "<strong>agai</strong>"),
        ("Starts an emphasis *", "Starts an emphasis</p>"),
    ],
)
def test_half_finished_markdown_is_shown_finished_while_streaming(draft, shown):
    html = render_answer(draft, known=[], prefix="m1", streaming=True).html
    assert shown in html and "**" not in html and "__" not in html and "`" not in html


def test_an_open_code_fence_is_left_alone_while_streaming():
    html = render_answer("```python\nx = '**'", known=[], prefix="m1", streaming=True).html
    assert "<pre><code" in html and "x = '**'" in html.replace("&#x27;", "'").replace("&#39;", "'")


def test_answer_markdown_numbers_markers_and_lists_sources():
    from chat.rendering import answer_markdown

    text = answer_markdown(f"A **fact.**[SourceId: {DOC}:1] Another [SourceId: {DOC}:2].", known=[source(1), source(2)])
    first, sources = text.split("\n\nSources:\n")
    assert first == "A **fact.** [1] Another [2]."
    assert sources.splitlines()[0].startswith("- [1] ")


def test_a_citation_ragchat_attributed_shows_as_such():
    # The model cited source 1; ragchat attached source 2 (and source 1 again, elsewhere).
    text = (
        f"Cited [SourceId: {DOC}:1]. Attached [SourceId: {DOC}:2; attributed]. Again [SourceId: {DOC}:1; attributed]."
    )
    rendered = render_answer(text, known=[source(1), source(2)], prefix="m1")
    assert [(s["n"], s["attributed"]) for s in rendered.sources] == [(1, False), (2, True)]
    assert "SourceId" not in rendered.html and "attributed]" not in rendered.html
    assert rendered.html.count('class="cite cite-by-ragchat"') == 2
    assert rendered.html.count('<span class="cite" ') == 1
    assert rendered.html.count("Attributed by ragchat") == 2
    assert 'aria-label="Source 2, attributed by ragchat: Doc 2"' in rendered.html
    assert 'aria-label="Source 1: Doc 1"' in rendered.html


def test_answer_markdown_says_which_sources_ragchat_attributed():
    from chat.rendering import answer_markdown

    text = answer_markdown(
        f"One [SourceId: {DOC}:1]. Two [SourceId: {DOC}:2; attributed]. One [SourceId: {DOC}:1; attributed].",
        known=[source(1), source(2)],
    )
    first, sources = text.split("\n\nSources:\n")
    assert first == "One [1]. Two [2]. One [1]."
    assert sources.splitlines() == ["- [1] Doc 1", "- [2] Doc 2 - attributed by ragchat"]
