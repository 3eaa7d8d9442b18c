"""The two leaks of issue 10, reproduced through the real path (chat websocket, fake Ollama, embedded
store, routing), and closed:

1. An asker holding IT and Facilities asks an IT question, then one that is routed to the
   Facilities owner, who does not hold IT: the owner's page must not show the IT passage, the draft
   or the earlier answer built from it — and must say what it withholds, and still take an answer.
2. A staff user who is not a superuser, holding only `public`, must not open routed questions.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.urls import reverse

from routing.models import RoutedQuestion
from tests.routing.conftest import (
    CONTRACT_Q,
    LAPTOP_DOC,
    LAPTOP_Q,
    PARKING_Q,
    ask,
    client_for,
    high_confidence,
    low_confidence,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("drain_turns")]

IT_TEXT = "open a ticket in the IT portal"  # words of the IT document (Laptops.md)


async def test_owner_does_not_read_another_tags_passages_drafts_or_answers(asker, owner, corpus, fake_ollama):
    high_confidence(fake_ollama)
    session, first = await ask(asker, LAPTOP_Q)
    assert first.action == "CITE" and [c["document_id"] for c in first.citations] == [LAPTOP_DOC]
    assert IT_TEXT in first.content  # the answer quotes the IT document

    fake_ollama.reply(f"Maybe this helps: {IT_TEXT}.")  # a draft that quotes what the context held
    fake_ollama.rating(0)
    await ask(asker, PARKING_Q, session=session)
    question = await RoutedQuestion.objects.select_related("tag").aget()
    assert question.target_id == owner.pk and question.tag.slug == "facilities"

    page = await sync_to_async(lambda: client_for(owner).get(reverse("routing:question", args=[question.pk])))()
    html = page.content.decode()
    assert page.status_code == 200
    assert IT_TEXT not in html and "Laptops.md" not in html and "charger within two days" not in html
    assert "Withheld: it drew on documents you may not read" in html  # the earlier IT answer
    # The draft is withheld either way: drawn from the IT passage, or written with the earlier IT
    # answer in its prompt (the PARKING question is a new topic, so it may retrieve only
    # Facilities documents, yet the model saw, and here repeats, the earlier answer).
    assert "The draft is withheld" in html
    if any(c["document_id"] == LAPTOP_DOC for c in question.citations):
        assert "you do not have access to" in html
    else:
        assert "earlier answers of this conversation in view that you may not see" in html
    assert 'id="answer-form"' in html

    answered = await sync_to_async(
        lambda: client_for(owner).post(
            reverse("routing:question", args=[question.pk]), {"answer": "Ask the facilities desk."}
        )
    )()
    assert answered.status_code == 302
    assert (await RoutedQuestion.objects.aget(pk=question.pk)).status == "answered"


async def test_staff_without_superuser_cannot_open_or_receive_routed_questions(
    asker, owner, corpus, fake_ollama, django_user_model, mailoutbox
):
    staff = await sync_to_async(django_user_model.objects.create_user)(
        "stan", password="pw-stan-123", is_staff=True, email="stan@example.com"
    )
    low_confidence(fake_ollama)
    await ask(asker, PARKING_Q)  # to the Facilities owner
    low_confidence(fake_ollama)
    await ask(asker, CONTRACT_Q)  # Legal's owner is gone: it falls back to the admins
    questions = [q async for q in RoutedQuestion.objects.all()]
    assert len(questions) == 2 and any(q.fallback for q in questions)
    client = await sync_to_async(client_for)(staff)
    for q in questions:
        response = await sync_to_async(lambda q=q: client.get(reverse("routing:question", args=[q.pk])))()
        assert response.status_code == 404
    inbox = await sync_to_async(lambda: client.get(reverse("routing:inbox")))()
    assert inbox.status_code == 404
    assert all("stan@example.com" not in m.to for m in mailoutbox)
