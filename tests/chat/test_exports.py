"""A chat exported as Markdown and as PDF carries what its page shows: a regenerated answer's
versions say which is which, a stopped answer keeps the passages it found, and a sentence no source
supports is marked as on the page."""

from __future__ import annotations

import io

import pytest
from django.urls import reverse

from chat import services
from chat.models import Message

pytestmark = pytest.mark.django_db

DOC = "3f1c2a4e-8b7d-4c6e-9a1b-2d3e4f5a6b7c"


def _passage(chunk: int, name: str, snippet: str, page: int) -> dict:
    return {
        "source_id": f"{DOC}:{chunk}",
        "document_id": DOC,
        "document_name": name,
        "chunk_index": chunk,
        "page_number": page,
        "section": "Annual leave" if chunk == 0 else "Carry-over",
        "relevance_score": 0.8,
        "snippet": snippet,
        "snippet_full": snippet,
    }


P0 = _passage(0, "Vacation Policy.pdf", "Every full-time employee receives 25 vacation days per year.", 3)
P1 = _passage(1, "Vacation Policy.pdf", "Up to five unused days carry over until March 31.", 4)
FIRST = f"You get 25 days [SourceId: {DOC}:0]."
SECOND = f"Every full-time employee gets 25 days [SourceId: {DOC}:0]. Managers approve requests within an hour."


@pytest.fixture
def chat(user):
    session = services.session_create(user=user, title="Vacation days")
    q1 = services.message_create_user(session=session, content="How many vacation days do I get?")
    answer = {"session": session, "role": "assistant", "reply_to": q1, "citations": [P0], "passages": [P0, P1]}
    Message.objects.create(**answer, status="complete", content=FIRST)
    # Regenerated: the second version states a sentence no source supports (the grounding check's
    # offsets, as the core stores them).
    unsupported = SECOND.index("Managers")
    Message.objects.create(
        **answer,
        status="complete",
        content=SECOND,
        grounding={
            "claims": 2,
            "sentences": [
                {"start": 0, "end": unsupported - 1, "status": "supported"},
                {"start": unsupported, "end": len(SECOND), "status": "unsupported"},
            ],
        },
    )
    q2 = services.message_create_user(session=session, content="Do unused days carry over?")
    # Stopped by its asker after a few words: the page lists the passages the turn found.
    Message.objects.create(
        session=session,
        role="assistant",
        reply_to=q2,
        status="interrupted",
        error="You stopped this answer.",
        error_type="Stopped",
        content=f"Up to five days carry over [SourceId: {DOC}:1] and",
        passages=[P0, P1],
    )
    return session


def _markdown(client, session) -> str:
    return client.get(reverse("chat:export_md", args=[session.pk])).content.decode()


def _pdf_text(client, session) -> str:
    from pypdf import PdfReader

    body = client.get(reverse("chat:export_pdf", args=[session.pk])).content
    return " ".join(" ".join(page.extract_text().split()) for page in PdfReader(io.BytesIO(body)).pages)


def test_the_versions_of_a_regenerated_answer_are_labelled(client, user, chat):
    client.force_login(user)
    text = _markdown(client, chat)
    assert text.count("## Assistant · version 1 of 2 · ") == 1 and text.count("## Assistant · version 2 of 2 · ") == 1
    assert text.index("version 1 of 2") < text.index("You get 25 days [1].") < text.index("version 2 of 2")
    # The stopped answer has one version: no label.
    assert text.count("## Assistant · ") == 3
    pdf = _pdf_text(client, chat).lower()  # the PDF's headings are set in capitals
    assert "assistant · version 1 of 2" in pdf and "assistant · version 2 of 2" in pdf


def test_a_stopped_answer_keeps_what_it_found(client, user, chat):
    client.force_login(user)
    text = _markdown(client, chat)
    stopped = text[text.index("Up to five days carry over") :]
    # Its marker numbered as on the page, the passage it cites listed under it.
    assert stopped.startswith("Up to five days carry over [1] and")
    assert "- [1] Vacation Policy.pdf (page 4, Carry-over)" in stopped
    assert "_Stopped before it finished._" in stopped
    # The other passage found, as on the page.
    assert "Other passages found:" in stopped
    assert (
        '- Vacation Policy.pdf (page 3, Annual leave): "Every full-time employee receives 25 vacation days' in stopped
    )
    pdf = _pdf_text(client, chat)
    assert "Other passages found" in pdf and "Every full-time employee receives 25 vacation days per year." in pdf


def test_a_sentence_no_source_supports_is_marked(client, user, chat):
    client.force_login(user)
    text = _markdown(client, chat)
    assert "Every full-time employee gets 25 days [1]. Managers approve requests within an hour. _(No source" in text
    assert text.count("_(No source supports this sentence: check it before relying on it.)_") == 1
    assert "No source supports this sentence" in _pdf_text(client, chat)
