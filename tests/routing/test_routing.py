"""Routing end to end: the real chat websocket, fake Ollama, embedded Qdrant (hashing embedder),
the real database, Django's locmem email backend."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from chat import turns
from chat.models import ChatSession, Message
from ragchat.mail import wait_sent
from routing.models import QuestionGroup, RoutedQuestion
from routing.services import question_answer, question_route
from tests.chat.conftest import open_tab
from tests.fakes.mail import SLOW_SECONDS, use_smtp
from tests.routing.conftest import (
    CANTEEN_Q,
    CONTRACT_Q,
    LAPTOP_Q,
    PARKING_DOC,
    PARKING_Q,
    ask,
    client_for,
    high_confidence,
    low_confidence,
    open_inbox,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("drain_turns")]


@sync_to_async
def routed(**filters) -> list[RoutedQuestion]:
    return list(RoutedQuestion.objects.filter(**filters).select_related("tag", "target", "group").order_by("id"))


def in_fresh_thread(fn):
    """Run fn in a new thread with an empty context (no asgiref executor state inherited)."""
    result: dict = {}

    def run() -> None:
        try:
            result["value"] = fn()
        except BaseException as e:  # re-raised in the caller
            result["error"] = e

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    if "error" in result:
        raise result["error"]
    return result["value"]


def _client(who):
    return who if isinstance(who, Client) else client_for(who)


@sync_to_async
def get(who, url):
    """GET as a user (signed in with a fresh client) or with a given client."""
    return _client(who).get(url)


@sync_to_async
def post(who, url, data=None, **extra):
    """POST; returns once the emails it queued (this thread runs under the test's loop) are sent."""
    response = _client(who).post(url, data or {}, **extra)
    assert wait_sent()
    return response


# ------------------------------------------------------------------------------------- creation


async def test_low_confidence_answer_is_routed_to_the_tag_owner(
    asker, owner, corpus, fake_ollama, mailoutbox, settings
):
    settings.RAGCHAT_BASE_URL = "https://chat.example.com"
    low_confidence(fake_ollama)
    session, answer = await ask(asker, PARKING_Q)
    assert answer.action == "ROUTE"

    [question] = await routed()
    assert question.target_id == owner.pk and question.tag.slug == "facilities"
    assert question.fallback is False and question.origin == "route"
    assert question.reason == answer.route_target["reason"] and "facilities owner" in question.reason
    assert question.asker_id == asker.pk and question.session_id == session.pk
    assert question.message_id == answer.pk and question.question_message_id == answer.reply_to_id
    assert question.question == PARKING_Q and question.contextual_query == PARKING_Q
    assert question.draft == "I am not sure about that."
    assert question.confidence == answer.confidence and question.confidence["llm"] == 0
    assert [c["document_id"] for c in question.citations] == [PARKING_DOC]
    assert question.status == "open" and question.group is not None

    [mail] = mailoutbox
    assert mail.to == ["olivia@example.com"]
    assert PARKING_Q in mail.body
    assert f"https://chat.example.com{reverse('routing:question', args=[question.pk])}" in mail.body


async def test_greetings_and_confident_answers_are_never_routed(asker, owner, corpus, fake_ollama, mailoutbox):
    low_confidence(fake_ollama)  # even a model that would rate itself low is not asked for "hello"
    await ask(asker, "hello!")
    high_confidence(fake_ollama)
    _, answer = await ask(asker, PARKING_Q)
    assert answer.action == "CITE"
    assert await routed() == []
    assert mailoutbox == []


@pytest.mark.parametrize(
    ("question_text", "tag_slug", "reason"),
    [
        (CANTEEN_Q, None, "No specific tags in context - routing to admin"),  # public only: no tag
        (LAPTOP_Q, "it", "No owner for tag 'it' - routing to admin"),
        (CONTRACT_Q, "legal", "Owner not found for tag 'legal' - routing to admin"),  # account deactivated
    ],
)
async def test_admin_fallback(
    asker, owner, admin_user, corpus, fake_ollama, mailoutbox, question_text, tag_slug, reason
):
    low_confidence(fake_ollama)
    await ask(asker, question_text)
    [question] = await routed()
    assert question.fallback is True and question.target_id is None
    assert question.reason == reason
    assert (question.tag.slug if question.tag else None) == tag_slug
    assert [m.to for m in mailoutbox] == [["root@example.com"]]
    # The admins see it in their inbox; the facilities owner does not.
    admin_page = await get(admin_user, reverse("routing:inbox"))
    assert question_text in admin_page.content.decode()
    owner_page = await get(owner, reverse("routing:inbox"))
    assert question_text not in owner_page.content.decode()
    # The asker's chat names the administrators (people, not a settings address).
    chat_page = (await get(asker, reverse("chat:session", args=[question.session_id]))).content.decode()
    assert "Your question was sent to the administrators (root)" in " ".join(chat_page.split())
    assert "admin@company.com" not in chat_page and "@example.com" not in chat_page


async def test_no_context_answer_sent_to_a_person_does_not_say_contact_the_team(asker, owner, corpus, fake_ollama):
    """The spec's canned no-context answer ends "Please contact the relevant team"; once the
    question has gone to a person, the chat shows only its first sentence next to the notice."""
    from chat.models import Message
    from ragchat.services.prompts import INSUFFICIENT_CONTEXT_ANSWER, MODEL_INSUFFICIENT_SENTENCE

    low_confidence(fake_ollama)
    session, answer = await ask(asker, PARKING_Q)
    await Message.objects.filter(pk=answer.pk).aupdate(content=INSUFFICIENT_CONTEXT_ANSWER, action="ROUTE")
    page = " ".join((await get(asker, reverse("chat:session", args=[session.pk]))).content.decode().split())
    assert MODEL_INSUFFICIENT_SENTENCE in page and "contact the relevant team" not in page
    assert "Your question was sent to Olivia Owner, the owner of Facilities" in page


async def test_admin_fallback_when_the_owner_account_was_deleted(asker, owner, admin_user, corpus, fake_ollama):
    await owner.adelete()  # the tag's owner is SET_NULL: the tag is ownerless
    low_confidence(fake_ollama)
    await ask(asker, PARKING_Q)
    [question] = await routed()
    assert question.fallback is True and question.target_id is None and question.tag.slug == "facilities"
    assert question.reason == "No owner for tag 'facilities' - routing to admin"


async def test_ask_the_owner_on_a_confident_answer(asker, owner, stranger, corpus, fake_ollama, mailoutbox):
    high_confidence(fake_ollama)
    _, answer = await ask(asker, PARKING_Q)
    assert answer.action == "CITE"
    url = reverse("routing:escalate", args=[answer.pk])

    assert (await post(stranger, url)).status_code == 404  # not the asker's answer
    assert (await post(asker, reverse("routing:escalate", args=[999999]))).status_code == 404
    assert await routed() == []

    response = await post(asker, url, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "Sent to Olivia Owner" in response.content.decode()
    again = await post(asker, url, HTTP_HX_REQUEST="true")
    assert again.status_code == 200
    [question] = await routed()
    assert question.origin == "manual" and question.target_id == owner.pk and not question.fallback
    assert question.message_id == answer.pk and question.draft == answer.content
    assert [c["cited"] for c in question.citations][:1] == [True]
    assert [m.to for m in mailoutbox] == [["olivia@example.com"]]


async def test_a_greeting_cannot_be_escalated(asker, owner, corpus, fake_ollama):
    _, answer = await ask(asker, "thanks!")
    response = await post(asker, reverse("routing:escalate", args=[answer.pk]), HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "This reply cannot be sent to an owner." in response.content.decode()
    assert await routed() == []


# ------------------------------------------------------------------------------------- email


async def test_a_slow_mail_server_does_not_hold_the_database_thread(
    asker, owner, corpus, fake_ollama, mailoutbox, settings
):
    """The routed question's email is made on the consumer's database thread (an on_commit hook)
    and sent on the mail thread (ragchat.mail): while the mail server takes SLOW_SECONDS, the
    process's other database work goes on, and the email still arrives."""
    settings.EMAIL_BACKEND = "tests.fakes.mail.SlowBackend"
    low_confidence(fake_ollama)
    session = await ChatSession.objects.acreate(owner=asker)
    tab = await open_tab(asker, session.pk)
    assert await tab.connect()
    waits: list[float] = []

    async def probe() -> None:  # another user's database work, all through the turn and the send
        while True:
            started = time.monotonic()
            await database_sync_to_async(RoutedQuestion.objects.exists)()
            waits.append(time.monotonic() - started)
            await asyncio.sleep(0.02)

    prober = asyncio.create_task(probe())
    try:
        await tab.ask(PARKING_Q)
        await tab.until_final()
        await turns.wait_idle()
        deadline = time.monotonic() + 5 * SLOW_SECONDS
        while not mailoutbox and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
    finally:
        prober.cancel()
        await asyncio.gather(prober, return_exceptions=True)
        await tab.close()
    [question] = await routed()
    [mail] = mailoutbox
    assert mail.to == ["olivia@example.com"] and PARKING_Q in mail.body
    assert len(waits) > 10 and max(waits) < SLOW_SECONDS / 2


async def test_a_mail_server_outage_is_logged_and_the_question_still_routed(
    asker, owner, corpus, fake_ollama, mailoutbox, settings, caplog
):
    settings.EMAIL_BACKEND = "tests.fakes.mail.BrokenBackend"
    low_confidence(fake_ollama)
    with caplog.at_level(logging.ERROR, logger="routing.notifications"):
        _, answer = await ask(asker, PARKING_Q)
    assert answer.action == "ROUTE"
    [question] = await routed()
    assert question.target_id == owner.pk and question.status == "open"
    [record] = [r for r in caplog.records if r.name == "routing.notifications"]
    assert record.getMessage() == "routing: email failed: mail server down"
    assert record.levelno == logging.ERROR and record.event == "routing_email_failed"
    assert mailoutbox == []


async def test_a_routed_question_reaches_its_owner_through_an_smtp_server(
    asker, owner, corpus, fake_ollama, smtp_server, settings
):
    """The same email through Django's SMTP backend to a real mail server on a local port."""
    use_smtp(settings, smtp_server.port, DEFAULT_FROM_EMAIL="ragchat@chat.example.com")
    low_confidence(fake_ollama)
    _, answer = await ask(asker, PARKING_Q)
    assert answer.action == "ROUTE"
    [received] = smtp_server.wait_for(1)
    assert received.mail_from == "ragchat@chat.example.com" and received.rcpt_tos == ["olivia@example.com"]
    assert received.message["To"] == "olivia@example.com" and PARKING_Q in received.message.get_content()


# ------------------------------------------------------------------------------------- access


async def test_only_the_owner_and_admins_see_and_answer(asker, owner, stranger, admin_user, corpus, fake_ollama):
    low_confidence(fake_ollama)
    await ask(asker, PARKING_Q)
    [question] = await routed()
    url = reverse("routing:question", args=[question.pk])

    assert (await get(stranger, url)).status_code == 404
    assert (await get(asker, url)).status_code == 404  # the asker is not the owner either
    assert (await post(stranger, url, {"answer": "Forged answer"})).status_code == 404
    assert (await post(stranger, reverse("routing:close", args=[question.pk]))).status_code == 404
    assert (await get(owner, reverse("routing:question", args=[question.pk + 1000]))).status_code == 404
    assert (await get(stranger, reverse("routing:inbox"))).status_code == 404  # no tag, no inbox
    [still] = await routed()
    assert still.status == "open" and still.answer == ""
    assert not await Message.objects.filter(role="owner").aexists()

    page = (await get(owner, url)).content.decode()
    assert PARKING_Q in page and "I am not sure about that." in page and "Parking.md" in page
    assert 'name="csrfmiddlewaretoken"' in page and "Publish as verified knowledge" in page
    assert (await get(admin_user, url)).status_code == 200


async def test_csrf_is_required_to_answer(asker, owner, corpus, fake_ollama):
    low_confidence(fake_ollama)
    await ask(asker, PARKING_Q)
    [question] = await routed()
    client = Client(enforce_csrf_checks=True)
    await sync_to_async(client.force_login)(owner)
    response = await post(client, reverse("routing:question", args=[question.pk]), {"answer": "No token"})
    assert response.status_code == 403
    assert (await routed())[0].status == "open"


async def test_inbox_socket_only_hears_its_own_users_questions(asker, owner, stranger, corpus, fake_ollama):
    anonymous = await open_inbox(None)
    assert not await anonymous.connect()

    owner_tab = await open_inbox(owner)
    assert await owner_tab.connect()
    spy = await open_inbox(stranger)
    assert await spy.connect()
    # A forged subscription: the client asks for the owner's group; the server ignores it.
    await spy.comm.send_json_to({"subscribe": f"routing.user.{owner.pk}", "group": f"routing.user.{owner.pk}"})

    low_confidence(fake_ollama)
    await ask(asker, PARKING_Q)
    frame = await owner_tab.receive()
    [question] = await routed()
    row = f'id="inbox-q{question.pk}"' if question.group_id is None else f'id="inbox-g{question.group_id}"'
    assert row in frame and "data-live-move" in frame and PARKING_Q in frame  # moved to the top (upsert)
    assert 'id="inbox-open-count" hx-swap-oob="true">1<' in frame
    assert reverse("routing:question", args=[question.pk]) in frame
    assert await spy.comm.receive_nothing(timeout=0.5)

    # Answered: the row leaves the owner's inbox live; the spy still hears nothing.
    await sync_to_async(question_answer)(question=question, user=owner, text="At the facilities desk.")
    frame = await owner_tab.receive()
    assert f'{row} hx-swap-oob="delete"' in frame and 'id="inbox-open-count" hx-swap-oob="true">0<' in frame
    assert await spy.comm.receive_nothing(timeout=0.5)
    await owner_tab.close()
    await spy.close()


async def test_navigation_badges_are_live_on_every_page(asker, owner, stranger, corpus, fake_ollama):
    """ws/nav/ (every page but the inbox, which has its own): the owner's open-question badge and
    the asker's bell (a new answer) follow routing, answering and reading, without a reload."""
    owner_nav = await open_inbox(owner, "/ws/nav/")
    asker_nav = await open_inbox(asker, "/ws/nav/")
    spy = await open_inbox(stranger, "/ws/nav/")
    for tab in (owner_nav, asker_nav, spy):
        assert await tab.connect()
    low_confidence(fake_ollama)
    session, _ = await ask(asker, PARKING_Q)
    frame = await owner_nav.receive()
    assert 'id="nav-inbox-count"' in frame and 'hx-swap-oob="true">1</span>' in frame
    [question] = await routed()
    await sync_to_async(question_answer)(question=question, user=owner, text="At the facilities desk.")
    frame = await asker_nav.receive()
    assert 'id="nav-bell-count"' in frame and 'title="1 new for you" hx-swap-oob="true">1<' in frame
    while 'id="nav-inbox-count"' not in (frame := await owner_nav.receive()) or ">0<" not in frame:
        pass
    assert " hidden" in frame  # no open question: the badge hides
    # The asker opens the chat: the badge on their other pages drops to zero.
    assert (await get(asker, reverse("chat:session", args=[session.pk]))).status_code == 200
    frame = await asker_nav.receive()
    assert 'id="nav-bell-count"' in frame and " hidden" in frame and ">0<" in frame
    assert await spy.comm.receive_nothing(timeout=0.5)
    for tab in (owner_nav, asker_nav, spy):
        await tab.close()


# ------------------------------------------------------------------------------------- delivery


async def test_answer_is_delivered_live_into_the_open_session(asker, owner, corpus, fake_ollama, mailoutbox):
    low_confidence(fake_ollama)
    session, _ = await ask(asker, PARKING_Q)
    [question] = await routed()
    mailoutbox.clear()

    tab = await open_tab(asker, session.pk)
    assert await tab.connect()
    response = await post(
        owner,
        reverse("routing:question", args=[question.pk]),
        {"answer": "Ask the facilities desk on floor 2; permits are free."},
    )
    assert response.status_code == 302
    # Pushes from the database thread are handed to the loop (ragchat.live): the routed answer's own
    # re-render ("sent to ...") may still arrive after the tab connected. The owner's answer follows.
    frame = await tab.receive(timeout=5)
    while 'class="msg msg-owner' not in frame and 'class="msg msg-assistant' in frame:
        frame = await tab.receive(timeout=5)
    assert 'class="msg msg-owner' in frame and "Answer from Olivia Owner" in frame
    assert "Ask the facilities desk on floor 2" in frame and "<time" in frame
    await tab.close()

    [question] = await routed()
    assert question.status == "answered" and question.answered_by_id == owner.pk and question.answered_at
    reply = await Message.objects.aget(pk=question.answer_message_id)
    assert reply.role == "owner" and reply.author_id == owner.pk and reply.session_id == session.pk
    assert reply.reply_to_id == question.question_message_id
    [mail] = mailoutbox
    assert mail.to == ["erin@example.com"] and "Olivia Owner answered your question" in mail.body
    assert reverse("chat:session", args=[session.pk]) in mail.body


async def test_an_answered_question_page_says_where_it_went_not_where_it_is_going(asker, owner, corpus, fake_ollama):
    """Issue 38: the page kept the orange "Low confidence: …% - routing to the owner of …" notice
    after the answer; once answered it says, muted, where the question went."""
    low_confidence(fake_ollama)
    await ask(asker, PARKING_Q)
    [question] = await routed()
    url = reverse("routing:question", args=[question.pk])
    page = (await get(owner, url)).content.decode()
    assert '<p class="question-reason"><span aria-hidden="true">↗</span> Low confidence: ' in page
    assert "routing to the owner of Facilities</p>" in page and f"<title>Question: {PARKING_Q}" in page

    await sync_to_async(question_answer)(question=question, user=owner, text="Ask the facilities desk.")
    page = (await get(owner, url)).content.decode()
    assert '<p class="question-reason">' not in page and "routing to" not in page
    assert re.search(
        r'<p class="question-reason is-settled">Low confidence: \d+% - sent to the owner of Facilities</p>', page
    )


async def test_answer_is_there_on_reload_and_the_badge_clears_when_opened(asker, owner, corpus, fake_ollama):
    low_confidence(fake_ollama)
    session, _ = await ask(asker, PARKING_Q)
    [question] = await routed()
    await sync_to_async(question_answer)(question=question, user=owner, text="Ask the facilities desk.")

    client = await sync_to_async(client_for)(asker)
    home = (await get(client, reverse("routing:mine"))).content.decode()
    assert re.search(r'id="nav-bell-count"[^>]*>1<', home)
    page = (await get(client, reverse("chat:session", args=[session.pk]))).content.decode()
    assert "Answer from Olivia Owner" in page and "Ask the facilities desk." in page
    assert re.search(r'id="nav-bell-count"[^>]* hidden>0<', page)  # opening the session marked it seen
    assert (await routed())[0].seen_at is not None


# ------------------------------------------------------------------------------------- grouping


async def test_similar_questions_are_grouped_and_one_answer_reaches_everyone(
    asker, second_asker, owner, corpus, fake_ollama, mailoutbox
):
    low_confidence(fake_ollama)
    first_session, _ = await ask(asker, PARKING_Q)
    second_session, _ = await ask(second_asker, "how do I get a parking permit for the company garage")
    await ask(asker, "Is the company garage parking permit renewed every year automatically?")
    first, second, third = await routed()
    assert first.group_id == second.group_id
    assert third.group_id != first.group_id
    assert await QuestionGroup.objects.acount() == 2
    assert len(mailoutbox) == 2  # one email per group, not per asker

    inbox = (await get(owner, reverse("routing:inbox"))).content.decode()
    assert "2 people asked" in inbox

    response = await post(owner, reverse("routing:question", args=[second.pk]), {"answer": "At the facilities desk."})
    assert response.status_code == 302
    first, second, third = await routed()
    assert (first.status, second.status, third.status) == ("answered", "answered", "open")
    for session in (first_session, second_session):
        assert await Message.objects.filter(session=session, role="owner", content="At the facilities desk.").aexists()


async def test_route_is_idempotent_per_answer(asker, owner, corpus, fake_ollama):
    low_confidence(fake_ollama)
    _, answer = await ask(asker, PARKING_Q)
    again = await sync_to_async(question_route)(message=answer)
    [question] = await routed()
    assert again.pk == question.pk


# ------------------------------------------------------------------------------------- figures


async def test_figures_per_tag(asker, owner, admin_user, corpus, fake_ollama):
    high_confidence(fake_ollama)
    await ask(asker, PARKING_Q)
    low_confidence(fake_ollama)
    await ask(asker, "Is the company garage parking permit renewed every year automatically?")
    [question] = await routed()
    await sync_to_async(question_answer)(question=question, user=owner, text="Yes.")

    from routing.figures import tag_figures

    figures = {f.slug: f for f in await sync_to_async(tag_figures)(user=owner)}
    assert list(figures) == ["facilities"]
    f = figures["facilities"]
    assert (f.asked, f.routed, f.open, f.share_routed) == (2, 1, 0, 50)
    assert f.median_answer_seconds is not None and f.median_answer_seconds >= 0
    admin_figures = {f.slug for f in await sync_to_async(tag_figures)(user=admin_user)}
    assert {"facilities", "it", "legal", ""} <= admin_figures
    page = (await get(owner, reverse("routing:inbox"))).content.decode()
    assert "Figures by tag" in page and "50%" in page


# ------------------------------------------------------------------------------------- verified knowledge


async def test_published_answer_is_cited_as_verified_knowledge_next_time(
    asker, second_asker, owner, corpus, fake_ollama
):
    from documents.models import Document
    from documents.tasks import wait_for_background_ingestion

    question_text = "What is the visitor parking permit policy for the company garage?"
    answer_text = "Visitors get a day parking permit for the company garage from reception."
    low_confidence(fake_ollama)
    await ask(asker, question_text)
    [question] = await routed()
    assert question.tag.slug == "facilities"
    # Posted from a plain thread (like a WSGI-style worker): ingestion runs inline before it returns.
    response = await asyncio.to_thread(
        in_fresh_thread,
        lambda: client_for(owner).post(
            reverse("routing:question", args=[question.pk]), {"answer": answer_text, "publish": "on"}
        ),
    )
    assert response.status_code == 302
    await wait_for_background_ingestion(timeout=30)
    question = (await routed())[0]
    document = await Document.objects.aget(pk=question.published_document_id)
    assert document.status == "ready", document.error
    assert document.chunk_metadata["verified"] is True and document.chunk_metadata["verified_by"] == "Olivia Owner"
    assert await sync_to_async(lambda: list(document.tags.values_list("slug", flat=True)))() == ["facilities"]

    # The next similar question retrieves it, and an answer citing it is a verified citation.
    fake_ollama.reply(f"{answer_text} [SourceId: {document.pk}:0]")
    fake_ollama.rating(100)
    session, answer = await ask(second_asker, "What is the parking permit policy for visitors?")
    assert str(document.pk) in [p["document_id"] for p in answer.passages]
    assert answer.action == "CITE", answer.confidence
    [citation] = answer.citations
    assert citation["document_id"] == str(document.pk)
    assert citation["metadata"]["verified"] is True
    assert citation["metadata"]["verified_by"] == "Olivia Owner"
    assert citation["metadata"]["verified_at"] == question.answered_at.date().isoformat()
    page = (await get(second_asker, reverse("chat:session", args=[session.pk]))).content.decode()
    at = timezone.localtime(question.answered_at)
    # The hover card, read from the database at render time ("Verified by Olivia Owner, 3 Mar 2026").
    assert f"Verified by Olivia Owner, {at.day} {at:%b %Y}" in page
    page = (await get(second_asker, reverse("chat:session", args=[session.pk]))).content.decode()
    assert "Verified by Olivia Owner" in page


async def test_admin_publishes_an_untagged_fallback_answer_under_a_chosen_tag(
    asker, admin_user, tags, corpus, fake_ollama
):
    from documents.models import Document
    from documents.tasks import wait_for_background_ingestion

    low_confidence(fake_ollama)
    await ask(asker, CANTEEN_Q)
    [question] = await routed()
    assert question.tag is None and question.fallback
    url = reverse("routing:question", args=[question.pk])
    refused = await post(admin_user, url, {"answer": "Until 13:30.", "publish": "on"})
    assert refused.status_code == 200 and "Choose the tag to publish this answer under." in refused.content.decode()
    assert (await routed())[0].status == "open"

    response = await asyncio.to_thread(
        in_fresh_thread,
        lambda: client_for(admin_user).post(
            url, {"answer": "Until 13:30.", "publish": "on", "publish_tag": tags["facilities"].pk}
        ),
    )
    assert response.status_code == 302
    await wait_for_background_ingestion(timeout=30)
    question = (await routed())[0]
    assert question.status == "answered"
    document = await Document.objects.aget(pk=question.published_document_id)
    assert document.status == "ready" and document.chunk_metadata["verified_by"] == "root"
    assert await sync_to_async(lambda: list(document.tags.values_list("slug", flat=True)))() == ["facilities"]


async def test_a_routed_answer_is_grouped_with_the_embedding_its_search_made(asker, owner, corpus, fake_ollama):
    """Routing runs on the database thread: it takes the query's vector from the cache the search
    filled instead of asking the event loop to embed it again (a trip that waited behind the loop)."""
    from ragchat import runtime
    from routing.services import _embed

    _, answer = await ask(asker, PARKING_Q)
    embedder = runtime.embedder()
    misses = embedder.misses
    vector, model = await sync_to_async(_embed)(answer.retrieval_query)
    assert vector and model and embedder.misses == misses
