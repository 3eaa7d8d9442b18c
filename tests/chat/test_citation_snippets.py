"""What a citation card shows of a Markdown document's passage: words, not Markdown syntax, and any
HTML in it as text. End to end: the real upload, parser, chunker and index (hashing embedder,
embedded Qdrant), the chat websocket with the fake Ollama, the chat page.

Nothing in chat turns Markdown into text for display: the Markdown parser does it when the document
is indexed (ragchat/services/parsing/markdown.py), so the chunk text, and the snippets cut from it,
are what a reader sees. These tests keep it that way for the documents that are Markdown: uploads,
imported web pages and published verified answers (routing.knowledge.knowledge_text).
"""

from __future__ import annotations

import html
import re

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from chat import turns
from chat.models import ChatSession
from routing.knowledge import knowledge_text
from tests.chat.conftest import open_tab
from tests.documents.conftest import people, tags, upload  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("drain_turns")]

QUESTION = "How do visitors get a garage parking permit?"
ANSWER = (
    "Reception issues a *day permit*; see [the parking page](https://intra.example.com/parking).\n\n"
    "- Level -1 for visitors\n"
    "- Level -2 for staff\n\n"
    "Never paste `<img src=x onerror=alert(1)>` into the permit form."
)
CARD_RE = re.compile(r'class="cite-(snippet|full)"[^>]*>([^<]*)</span>')


def card_texts(page: str) -> list[str]:
    """The snippet and full passage of every citation card, as the browser shows them (unescaped)."""
    found = [html.unescape(text) for _, text in CARD_RE.findall(page)]
    assert found, "no citation card"
    return found


async def test_a_verified_answers_passage_shows_as_words_not_markdown(people, upload, fake_ollama):  # noqa: F811
    member = people["member"]
    text = knowledge_text(question=QUESTION, answer=ANSWER)
    assert text.startswith(f"# {QUESTION}\n") and "*day permit*" in text  # what the document holds: Markdown
    document = await sync_to_async(upload)(text.encode(), "verified-answer-1.md")
    assert document.status == "ready" and document.kind == "markdown", document.error

    fake_ollama.reply(f"Reception issues a day permit [SourceId: {document.id}:0].")
    fake_ollama.rating(90)
    session = await ChatSession.objects.acreate(owner=member)
    tab = await open_tab(member, session.pk)
    assert await tab.connect()
    await tab.ask(QUESTION)
    frame = await tab.until_final()
    await turns.wait_idle()
    await tab.close()

    client = Client()
    await sync_to_async(client.force_login)(member)
    page = (await sync_to_async(client.get)(f"/chat/{session.pk}/")).content.decode()
    for shown in (frame, page):
        snippet, full = card_texts(shown)[:2]
        for passage in (snippet, full):
            assert "**" not in passage and "#" not in passage and "`" not in passage
            assert not re.search(r"(?m)^\s*[-*+] ", passage)  # no list markers
            # The card's title is the question (the document's name); its text does not repeat it.
            assert QUESTION not in passage and passage.startswith("Reception issues a day permit")
        assert "[the parking page]" not in full and "](" not in full and "intra.example.com" not in full
        assert "see the parking page." in full and "Level -1 for visitors" in full and "*day permit*" not in full
        # Named once in each place that names the source: the marker's label, the card, the sources
        # list and the answer's copy text ("[1] <question>", no "(<question>)" after it).
        answer = shown[shown.index("msg msg-assistant") :]
        answer = answer[: answer.index("</article>")]
        assert answer.count(QUESTION) == 4, answer
        assert re.search(r'class="cite-meta">\s*Relevance', shown), "the place repeats the question"
        # HTML written in the document is text: escaped in the markup, shown as written.
        assert "Never paste <img src=x onerror=alert(1)> into the permit form." in full
        assert "&lt;img src=x onerror=alert(1)&gt;" in shown and "<img" not in shown


def test_a_passage_does_not_repeat_its_sources_name():
    """A chunk opens with its section's heading; under a name that says the same, the heading goes.
    A verified answer published with its question labelled again ("Question: ...") reads the same."""
    from ragchat.templatetags.sources import passage_text, source_place

    source = {"document_name": QUESTION, "section": QUESTION, "page_number": None}
    assert source_place(source) == ""
    assert source_place({**source, "section": "Visitors", "page_number": 2}) == "Page 2 · Visitors"
    assert passage_text(source, f"{QUESTION}\nReception issues a day permit.") == "Reception issues a day permit."
    labelled = f"{QUESTION}\nQuestion: {QUESTION}\nAnswer: Reception issues a day permit."
    assert passage_text(source, labelled) == "Reception issues a day permit."
    other = {"document_name": "Travel policy"}
    assert passage_text(other, "Per diem\nEmployees get 40 euros.") == "Per diem\nEmployees get 40 euros."
    assert passage_text(source, QUESTION) == QUESTION  # a passage that is only the heading stays
