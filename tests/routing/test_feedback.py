"""Feedback on answers and the review flow (issue 13), end to end: answers come from the real chat
websocket (fake Ollama, hashing embedder, embedded Qdrant); votes and the owner's review actions go
through the real views; email through Django's locmem backend.

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from chat.models import AnswerFeedback, ChatSession, Message
from documents.models import Document, Tag
from ragchat.mail import wait_sent
from routing.figures import tag_figures
from routing.models import RoutedQuestion, VerifiedAnswer
from routing.services import question_answer
from tests.chat.conftest import ChatSocket, open_tab
from tests.routing.conftest import (
    LAPTOP_DOC,
    LAPTOP_Q,
    PARKING_DOC,
    PARKING_Q,
    ask,
    client_for,
    high_confidence,
    low_confidence,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("drain_turns")]


@sync_to_async
def post(user, url, data=None, **extra):
    """POST as `user`; returns once the emails it queued (this thread runs under the test's loop) are sent."""
    response = client_for(user).post(url, data or {}, **extra)
    assert wait_sent()
    return response


@sync_to_async
def get(user, url):
    return client_for(user).get(url)


@sync_to_async
def items(**filters) -> list[RoutedQuestion]:
    return list(
        RoutedQuestion.objects.filter(origin="feedback", **filters)
        .select_related("tag", "target", "feedback")
        .order_by("id")
    )


@sync_to_async
def reload(obj):
    obj.refresh_from_db()
    return obj


def vote_url(message) -> str:
    return reverse("routing:feedback", args=[message.pk])


HTMX = {"HTTP_HX_REQUEST": "true"}


async def cited_answer(asker, fake):
    high_confidence(fake)
    session, answer = await ask(asker, PARKING_Q)
    assert answer.action == "CITE" and answer.citations
    return session, answer


# ------------------------------------------------------------------------------------- votes


async def test_down_vote_with_reason_becomes_a_review_item_for_the_tag_owner(
    asker, owner, corpus, fake_ollama, mailoutbox, settings
):
    settings.RAGCHAT_BASE_URL = "https://chat.example.com"
    session, answer = await cited_answer(asker, fake_ollama)

    # The chat page offers the vote on the answer (not pressed yet).
    page = (await get(asker, reverse("chat:session", args=[session.pk]))).content.decode()
    assert f'id="fb-{answer.pk}"' in page and 'aria-pressed="false"' in page

    # A bare down vote opens the reason form; nothing reaches an owner yet.
    response = await post(asker, vote_url(answer), {"vote": "-1"}, **HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "What was wrong with this answer?" in html and '<details class="fb-reason" open>' in html
    assert await items() == [] and mailoutbox == []

    response = await post(
        asker, vote_url(answer), {"vote": "-1", "reason": "outdated", "comment": "The desk moved."}, **HTMX
    )
    assert response.status_code == 200 and "Sent for review: outdated" in response.content.decode()
    [item] = await items()
    assert item.target_id == owner.pk and item.tag.slug == "facilities" and item.fallback is False
    assert item.reason.startswith("Review: ") and item.group_id is None
    assert item.message_id == answer.pk and item.question_message_id == answer.reply_to_id
    assert item.question == PARKING_Q and item.draft == answer.content
    assert PARKING_DOC in [c["document_id"] for c in item.citations]
    assert item.feedback.reason == "outdated" and item.feedback.comment == "The desk moved."
    [mail] = mailoutbox
    assert mail.to == ["olivia@example.com"] and "down-voted" in mail.body and "The desk moved." in mail.body
    assert f"https://chat.example.com{reverse('routing:question', args=[item.pk])}" in mail.body

    # The vote persists on reload; the answer does not read as "sent to a person".
    page = (await get(asker, reverse("chat:session", args=[session.pk]))).content.decode()
    assert 'data-vote="-1"' in page and "Sent for review: outdated" in page
    assert "Your question was sent" not in page

    # The owner's inbox lists it as a review item.
    inbox = (await get(owner, reverse("routing:inbox"))).content.decode()
    assert "Down-voted: outdated" in inbox
    # It is not a routed question: the R-ROUTE-7 figures do not count it.
    figures = {f.slug: f for f in await sync_to_async(tag_figures)(user=owner)}
    assert figures["facilities"].routed == 0 and figures["facilities"].asked == 1


async def test_changing_and_undoing_a_down_vote(asker, owner, corpus, fake_ollama, mailoutbox):
    _, answer = await cited_answer(asker, fake_ollama)
    await post(asker, vote_url(answer), {"vote": "-1", "reason": "wrong", "comment": "No."})
    [item] = await items()

    # A new reason and comment update the same open item (one item per feedback, no second email).
    await post(asker, vote_url(answer), {"vote": "-1", "reason": "incomplete", "comment": "Also the fee."})
    [same] = await items()
    assert same.pk == item.pk and same.status == "open"
    assert same.feedback.reason == "incomplete" and same.feedback.comment == "Also the fee."
    assert len(mailoutbox) == 1

    # Turning it up withdraws the open item (closed, with the note), and keeps one vote per person.
    await post(asker, vote_url(answer), {"vote": "1"})
    [same] = await items()
    assert same.status == "closed" and same.resolution == "" and same.resolution_note == "Withdrawn by the asker."
    assert await AnswerFeedback.objects.filter(message=answer).acount() == 1
    assert (await AnswerFeedback.objects.aget(message=answer)).vote == 1

    # Down again with a reason: the withdrawn item reopens.
    await post(asker, vote_url(answer), {"vote": "-1", "reason": "off_topic"})
    [same] = await items()
    assert same.status == "open" and same.feedback.reason == "off_topic"

    # Undo: the vote is gone, the item is closed and kept on record.
    await post(asker, vote_url(answer), {"vote": "0"})
    assert await AnswerFeedback.objects.filter(message=answer).acount() == 0
    [same] = await items()
    assert same.status == "closed" and same.feedback_id is None

    # Bad input: a clear message in the vote bar, nothing else changes (without script: see below).
    response = await post(asker, vote_url(answer), {"vote": "-1", "reason": "because"}, **HTMX)
    assert response.status_code == 200 and "Choose one of the reasons." in response.content.decode()
    response = await post(asker, vote_url(answer), {"vote": "7"}, **HTMX)
    assert response.status_code == 200 and "Choose helpful or not helpful." in response.content.decode()
    assert await AnswerFeedback.objects.filter(message=answer).acount() == 0


def form_token(page: str, action: str) -> str:
    """The CSRF token inside the page's form that posts to `action` ("" if the form has none)."""
    form = re.search(rf'<form[^>]*\saction="{re.escape(action)}"[^>]*>(.*?)</form>', page, re.DOTALL)
    assert form is not None, action
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]*)"', form.group(1))
    return token.group(1) if token else ""


async def test_vote_and_ask_the_owner_forms_post_without_script(asker, owner, corpus, fake_ollama):
    """A browser without script: no htmx header, only what the page's forms hold."""
    high_confidence(fake_ollama)
    session = await ChatSession.objects.acreate(owner=asker)
    tab = await open_tab(asker, session.pk)
    assert await tab.connect()
    await tab.ask(PARKING_Q)
    frame = await tab.until_final()
    await tab.close()
    answer = await Message.objects.aget(session=session, role="assistant")
    # A tab whose browser has no CSRF cookie gets its frames' forms without a token (htmx's header
    # serves there); one with a cookie gets a token of its own (the test below).
    assert f'id="fb-{answer.pk}"' in frame and not re.search(r'name="csrfmiddlewaretoken" value="[^"]', frame)

    browser = Client(enforce_csrf_checks=True)
    await sync_to_async(browser.force_login)(asker)
    page_url = reverse("chat:session", args=[session.pk])
    page = (await sync_to_async(browser.get)(page_url)).content.decode()
    escalate_url = reverse("routing:escalate", args=[answer.pk])
    vote_token, ask_token = form_token(page, vote_url(answer)), form_token(page, escalate_url)
    assert vote_token and ask_token

    # Without the token: refused, nothing recorded.
    refused = await sync_to_async(browser.post)(vote_url(answer), {"vote": "1"})
    assert refused.status_code == 403
    assert (await sync_to_async(browser.post)(escalate_url)).status_code == 403
    assert await AnswerFeedback.objects.acount() == 0 and not await RoutedQuestion.objects.aexists()

    # With the page's token: a down vote, back to the answer, whose reason form posts the same way.
    voted = await sync_to_async(browser.post)(vote_url(answer), {"vote": "-1", "csrfmiddlewaretoken": vote_token})
    assert voted.status_code == 302 and voted.headers["Location"] == f"{page_url}#m{answer.pk}"
    page = (await sync_to_async(browser.get)(page_url)).content.decode()
    assert "What was wrong with this answer?" in page
    reason = {"vote": "-1", "reason": "outdated", "csrfmiddlewaretoken": form_token(page, vote_url(answer))}
    assert (await sync_to_async(browser.post)(vote_url(answer), reason)).status_code == 302
    [item] = await items()
    assert item.feedback.vote == -1 and item.feedback.reason == "outdated"

    asked = await sync_to_async(browser.post)(escalate_url, {"csrfmiddlewaretoken": ask_token})
    assert asked.status_code == 302 and asked.headers["Location"] == f"{page_url}#m{answer.pk}"
    assert await RoutedQuestion.objects.filter(origin="manual", message=answer, target=owner).aexists()


async def test_answer_forms_sent_by_websocket_or_htmx_hold_the_viewers_token(asker, owner, corpus, fake_ollama):
    """An answer that arrives over the websocket, and the reason form htmx swaps in after a down
    vote, hold a token valid for the browser showing them: posted as plain forms (no htmx header),
    they are accepted."""
    high_confidence(fake_ollama)
    session = await ChatSession.objects.acreate(owner=asker)
    browser = Client(enforce_csrf_checks=True)
    await sync_to_async(browser.force_login)(asker)
    page_url = reverse("chat:session", args=[session.pk])
    assert (await sync_to_async(browser.get)(page_url)).status_code == 200
    csrf_cookie = browser.cookies[settings.CSRF_COOKIE_NAME].value
    tab = ChatSocket(
        browser.cookies[settings.SESSION_COOKIE_NAME].value,
        session.pk,
        cookies={settings.CSRF_COOKIE_NAME: csrf_cookie},
    )
    assert await tab.connect()
    await tab.ask(PARKING_Q)
    frame = await tab.until_final()
    await tab.close()
    answer = await Message.objects.aget(session=session, role="assistant")
    escalate_url = reverse("routing:escalate", args=[answer.pk])
    vote_token, ask_token = form_token(frame, vote_url(answer)), form_token(frame, escalate_url)
    assert vote_token and ask_token and csrf_cookie not in frame  # masked, never the cookie itself

    # A down vote through htmx (the page's header), then its reason form as a plain form.
    voted = await sync_to_async(browser.post)(vote_url(answer), {"vote": "-1"}, HTTP_X_CSRFTOKEN=vote_token, **HTMX)
    assert voted.status_code == 200
    fragment = voted.content.decode()
    assert "What was wrong with this answer?" in fragment
    reason = {"vote": "-1", "reason": "outdated", "csrfmiddlewaretoken": form_token(fragment, vote_url(answer))}
    assert (await sync_to_async(browser.post)(vote_url(answer), reason)).status_code == 302
    [item] = await items()
    assert item.feedback.reason == "outdated"

    # The websocket frame's own forms, posted without script.
    assert (await sync_to_async(browser.post)(escalate_url, {"csrfmiddlewaretoken": ask_token})).status_code == 302
    assert await RoutedQuestion.objects.filter(origin="manual", message=answer, target=owner).aexists()
    undo = {"vote": "0", "csrfmiddlewaretoken": vote_token}
    assert (await sync_to_async(browser.post)(vote_url(answer), undo)).status_code == 302
    assert not await AnswerFeedback.objects.filter(message=answer).aexists()  # the vote undone


def flashes(page: str) -> list[str]:
    """The messages the page says at its top (Django's messages framework), as text."""
    return [re.sub(r"<[^>]+>", "", p) for p in re.findall(r'<p class="flash-[a-z]+"[^>]*>(.*?)</p>', page, re.DOTALL)]


async def refused_without_script(user, url, data, *, back_to) -> str:
    """Post the way a browser without script does (no htmx header; following the redirect as it
    would): the person ends on the chat page at the answer `back_to`, a whole page. Its HTML."""
    response = await post(user, url, data, follow=True)
    page_url = reverse("chat:session", args=[back_to.session_id])
    assert response.redirect_chain == [(f"{page_url}#m{back_to.pk}", 302)]
    page = response.content.decode()
    assert response.status_code == 200 and page.lstrip().lower().startswith("<!doctype html>")
    assert f'id="m{back_to.pk}"' in page
    return page


async def test_a_refused_post_without_script_ends_on_the_chat_page_saying_why(asker, owner, corpus, fake_ollama):
    """Without script a refused vote or "Ask the owner" is not a bare 400 fragment: the person is back
    on the chat page at the answer (as after a vote that went through) with the reason said at the
    top, once; nothing is recorded. With htmx the form's fragment comes back, as before."""
    session, answer = await cited_answer(asker, fake_ollama)
    page_url = reverse("chat:session", args=[session.pk])

    page = await refused_without_script(asker, vote_url(answer), {"vote": "7"}, back_to=answer)
    assert flashes(page) == ["Choose helpful or not helpful."] and 'class="flash-error" role="alert"' in page
    page = await refused_without_script(asker, vote_url(answer), {"vote": "-1", "reason": "because"}, back_to=answer)
    assert flashes(page) == ["Choose one of the reasons."]
    page = await refused_without_script(
        asker, vote_url(answer), {"vote": "-1", "reason": "wrong", "comment": "x" * 2001}, back_to=answer
    )
    assert flashes(page) == ["Keep the comment under 2,000 characters."]
    assert await AnswerFeedback.objects.acount() == 0 and await items() == []
    # Said once: the next look at the chat shows it no more; the vote bar is as it was.
    page = (await get(asker, page_url)).content.decode()
    assert flashes(page) == [] and f'id="fb-{answer.pk}"' in page and 'aria-pressed="true"' not in page

    # The asker's own question is not an answer to rate: back to it, saying so.
    question = await Message.objects.aget(pk=answer.reply_to_id)
    page = await refused_without_script(asker, vote_url(question), {"vote": "1"}, back_to=question)
    assert flashes(page) == ["This reply cannot be rated."]

    # "Ask the owner" on a greeting (no button offers it; an old or hand-made form may).
    low_confidence(fake_ollama)
    _, hello = await ask(asker, "thanks!")
    page = await refused_without_script(asker, reverse("routing:escalate", args=[hello.pk]), {}, back_to=hello)
    assert flashes(page) == ["This reply cannot be sent to an owner."]
    assert not await RoutedQuestion.objects.aexists() and await AnswerFeedback.objects.acount() == 0

    # With htmx: the fragment that takes the form's place, not a page, and not a redirect.
    response = await post(asker, vote_url(answer), {"vote": "7"}, **HTMX)
    html = response.content.decode()
    assert response.status_code == 200 and "<!doctype" not in html.lower()
    assert html.startswith('<div class="feedback') and "Choose helpful or not helpful." in html
    response = await post(asker, reverse("routing:escalate", args=[hello.pk]), **HTMX)
    html = response.content.decode()
    assert response.status_code == 200 and "<!doctype" not in html.lower()  # htmx swaps only 2xx
    assert "escalated-error" in html and "This reply cannot be sent to an owner." in html
    assert not await RoutedQuestion.objects.aexists() and await AnswerFeedback.objects.acount() == 0


async def test_only_the_asker_votes_and_only_on_finished_answers(
    asker, second_asker, owner, admin_user, corpus, fake_ollama
):
    _, answer = await cited_answer(asker, fake_ollama)
    for other in (second_asker, owner, admin_user):
        response = await post(other, vote_url(answer), {"vote": "-1", "reason": "wrong"})
        assert response.status_code == 404
    assert (await post(asker, reverse("routing:feedback", args=[999999]), {"vote": "1"})).status_code == 404
    # The asker's own question (a user message) is not an answer to rate.
    response = await post(asker, vote_url(await Message.objects.aget(pk=answer.reply_to_id)), {"vote": "1"}, **HTMX)
    assert "This reply cannot be rated." in response.content.decode()
    assert await AnswerFeedback.objects.acount() == 0

    # Greetings get no vote buttons and refuse a vote.
    low_confidence(fake_ollama)
    session, hello = await ask(asker, "hello!")
    page = (await get(asker, reverse("chat:session", args=[session.pk]))).content.decode()
    assert f'id="fb-{hello.pk}"' not in page
    response = await post(asker, vote_url(hello), {"vote": "-1", "reason": "wrong"}, **HTMX)
    assert "This reply cannot be rated." in response.content.decode()

    # A failed answer neither.
    await Message.objects.filter(pk=answer.pk).aupdate(status=Message.Status.FAILED)
    response = await post(asker, vote_url(answer), {"vote": "1"}, **HTMX)
    assert "This reply cannot be rated." in response.content.decode()
    assert await items() == [] and await AnswerFeedback.objects.acount() == 0


async def test_review_item_of_an_untargeted_tag_goes_to_the_admins(asker, admin_user, corpus, fake_ollama):
    fake_ollama.reply_citing(1, words=30)
    fake_ollama.rating(100)
    _, answer = await ask(asker, LAPTOP_Q)  # IT has no owner
    assert LAPTOP_DOC in [c["document_id"] for c in answer.citations]
    await post(asker, vote_url(answer), {"vote": "-1", "reason": "wrong"})
    [item] = await items()
    assert item.tag.slug == "it" and item.fallback is True and item.target_id is None
    assert "No owner for tag 'it'" in item.reason
    inbox = (await get(admin_user, reverse("routing:inbox"))).content.decode()
    assert reverse("routing:question", args=[item.pk]) in inbox


async def test_a_down_voted_owner_answer_goes_to_the_tag_it_was_answered_under(asker, owner, corpus, fake_ollama):
    low_confidence(fake_ollama)
    _, draft = await ask(asker, PARKING_Q)
    routed = await RoutedQuestion.objects.aget(message=draft, origin="route")
    await sync_to_async(question_answer)(question=routed, user=owner, text="Ask the facilities desk.")
    reply = await Message.objects.aget(session=draft.session_id, role="owner")
    await post(asker, vote_url(reply), {"vote": "-1", "reason": "incomplete"})
    [item] = await items()
    assert item.tag.slug == "facilities" and item.target_id == owner.pk
    assert item.message_id == reply.pk and item.draft == "Ask the facilities desk."
    # A review item is not the answer's routed question: asking the owner about the draft again
    # still finds the routed one.
    assert (await post(asker, reverse("routing:escalate", args=[draft.pk]))).status_code == 302
    assert await RoutedQuestion.objects.filter(message=draft).exclude(origin="feedback").acount() == 1


# ------------------------------------------------------------------------------------- the review page


async def test_review_page_reads_as_a_review_and_withholds_sources_the_owner_may_not_read(
    asker, owner, corpus, fake_ollama, tags
):
    _, answer = await cited_answer(asker, fake_ollama)
    await post(asker, vote_url(answer), {"vote": "-1", "reason": "wrong", "comment": "The garage closed."})
    [item] = await items()
    # The asker could see a passage of a document the owner may not read (IT: no member olivia).
    hidden = await sync_to_async(Document.objects.get)(pk=LAPTOP_DOC)
    await RoutedQuestion.objects.filter(pk=item.pk).aupdate(
        citations=[
            *item.citations,
            {**item.citations[0], "source_id": "x-laptop", "document_id": LAPTOP_DOC, "document_name": hidden.title},
        ]
    )
    page = (await get(owner, reverse("routing:question", args=[item.pk]))).content.decode()
    assert "Down-voted: wrong" in page and "The garage closed." in page
    assert "The answer that was given" in page and "Mark a source outdated" in page and "Dismiss" in page
    assert "Parking.md" in page
    assert "Laptops.md" not in page and "1 source you do not have access to is not shown" in page
    # The outdated choice lists only documents the owner may read.
    assert f'value="{PARKING_DOC}"' in page and f'value="{LAPTOP_DOC}"' not in page
    # Named by its question, not by the routing notice it was built with (issue 38).
    assert f"<title>Review item: {PARKING_Q}" in page
    assert "Review: " not in page and "Sent to the owner of Facilities for review" in page


# ------------------------------------------------------------------------------------- resolutions


async def test_correct_delivers_to_the_asker_and_can_publish(asker, owner, corpus, fake_ollama, mailoutbox):
    session, answer = await cited_answer(asker, fake_ollama)
    await post(asker, vote_url(answer), {"vote": "-1", "reason": "outdated"})
    [item] = await items()
    mailoutbox.clear()
    url = reverse("routing:question", args=[item.pk])
    response = await post(owner, url, {"answer": "Permits now come from the new portal.", "publish": "on"})
    assert response.status_code == 302
    item = await reload(item)
    assert item.status == "answered" and item.resolution == "corrected"
    assert item.answered_by_id == owner.pk and item.published_document_id is not None
    correction = await Message.objects.aget(pk=item.answer_message_id)
    assert correction.session_id == session.pk and correction.role == "owner"
    assert correction.content == "Permits now come from the new portal."
    assert [m.to for m in mailoutbox] == [["erin@example.com"]]
    page = (await get(asker, reverse("chat:session", args=[session.pk]))).content.decode()
    assert "Permits now come from the new portal." in page
    # Idempotent: a second correction is refused and delivers nothing.
    response = await post(owner, url, {"answer": "Again."})
    assert response.status_code == 200 and "Corrected" in response.content.decode()
    assert await Message.objects.filter(session=session, role="owner").acount() == 1


async def test_mark_a_source_outdated_warns_wherever_it_is_cited(
    asker, second_asker, owner, admin_user, corpus, fake_ollama, mailoutbox, django_user_model
):
    uploader = await django_user_model.objects.acreate(username="ulla", email="ulla@example.com")
    await Document.objects.filter(pk=PARKING_DOC).aupdate(uploaded_by=uploader)
    session, answer = await cited_answer(asker, fake_ollama)
    await post(asker, vote_url(answer), {"vote": "-1", "reason": "outdated"})
    [item] = await items()
    mailoutbox.clear()
    url = reverse("routing:review_outdated", args=[item.pk])

    # Not a cited document, or somebody else: 404 and nothing changes.
    assert (await post(owner, url, {"document": LAPTOP_DOC})).status_code == 404
    for other in (asker, second_asker):
        assert (await post(other, url, {"document": PARKING_DOC})).status_code == 404
    assert (await sync_to_async(Document.objects.get)(pk=PARKING_DOC)).outdated_at is None

    response = await post(owner, url, {"document": PARKING_DOC, "note": "Garage rebuilt in 2026.", "confirm": "1"})
    assert response.status_code == 302
    item = await reload(item)
    assert (
        item.status == "closed" and item.resolution == "outdated" and item.resolution_note == "Garage rebuilt in 2026."
    )
    doc = await sync_to_async(Document.objects.select_related("outdated_by").get)(pk=PARKING_DOC)
    assert doc.outdated_at is not None and doc.outdated_by == owner and doc.outdated_note == "Garage rebuilt in 2026."
    [mail] = mailoutbox
    assert mail.to == ["ulla@example.com"] and "Parking.md" in mail.body and "Garage rebuilt" in mail.body

    # The warning, wherever the document is cited: the asker's chat (cards and sources), any later
    # answer citing it, the documents list and page, the owner's question page.
    page = (await get(asker, reverse("chat:session", args=[session.pk]))).content.decode()
    assert "Marked outdated by its owner: Garage rebuilt in 2026." in page
    _, later = await cited_answer(second_asker, fake_ollama)
    later_page = (await get(second_asker, reverse("chat:session", args=[later.session_id]))).content.decode()
    assert "cite-outdated" in later_page
    assert "Outdated" in (await get(asker, reverse("documents:list"))).content.decode()
    detail = (await get(asker, reverse("documents:detail", args=[PARKING_DOC]))).content.decode()
    assert "Marked outdated" in detail and "Clear the outdated mark" not in detail  # a member may not clear
    assert "Outdated" in (await get(owner, reverse("routing:question", args=[item.pk]))).content.decode()

    # Idempotent: the item is resolved; a second POST changes nothing and tells nobody.
    response = await post(owner, url, {"document": PARKING_DOC, "note": "Again.", "confirm": "1"})
    assert response.status_code == 302 and len(mailoutbox) == 1
    assert (await sync_to_async(Document.objects.get)(pk=PARKING_DOC)).outdated_note == "Garage rebuilt in 2026."

    # A member may not clear the mark; the tag's owner may.
    clear = reverse("documents:clear_outdated", args=[PARKING_DOC])
    assert (await post(asker, clear)).status_code == 404
    assert (await post(owner, clear)).status_code == 302
    assert (await sync_to_async(Document.objects.get)(pk=PARKING_DOC)).outdated_at is None
    page = (await get(asker, reverse("chat:session", args=[session.pk]))).content.decode()
    assert "Marked outdated" not in page


@sync_to_async
def verified_on_parking(owner, question: str, *, publishes: bool = False) -> VerifiedAnswer:
    """A verified answer that relied on the parking document (or, `publishes`, is published by it)."""
    tag = Tag.objects.get(slug="facilities")
    verified = VerifiedAnswer.objects.create(
        tag=tag,
        question=question,
        answer="At the facilities desk.",
        verified_by=owner,
        verified_at=timezone.now() - timedelta(seconds=30),
        review_by=timezone.localdate() + timedelta(days=90),
        document_id=PARKING_DOC if publishes else None,
    )
    if not publishes:
        verified.relied_on.add(PARKING_DOC)
    return verified


async def test_marking_a_source_outdated_asks_first_saying_what_it_affects(asker, owner, corpus, fake_ollama):
    """Issue 38: one click flagged a document and sent verified answers to "Needs review" with an
    empty note. Now the note is required, and the owner is told before anything changes how many
    verified answers go to "Needs review" and how many answers cite it; without script on a page of
    its own, with htmx in place of the card."""
    session, answer = await cited_answer(asker, fake_ollama)
    await post(asker, vote_url(answer), {"vote": "-1", "reason": "outdated"})
    [item] = await items()
    relying = await verified_on_parking(owner, "Who issues garage permits?")
    published = await verified_on_parking(owner, "Where is the garage?", publishes=True)
    url = reverse("routing:review_outdated", args=[item.pk])

    async def unchanged() -> None:
        doc = await sync_to_async(Document.objects.get)(pk=PARKING_DOC)
        assert doc.outdated_at is None and (await reload(item)).status == "open"
        assert {(await reload(v)).status for v in (relying, published)} == {"verified"}

    # The page shows the form: a note is required, and it says it will ask first.
    page = (await get(owner, reverse("routing:question", args=[item.pk]))).content.decode()
    assert 'id="outdated-note" name="note" rows="2" maxlength="2000" required' in page
    assert "Mark outdated…" in page

    # Without script: the first post is a page that asks, saying what it will affect.
    response = await post(owner, url, {"document": PARKING_DOC, "note": "Garage rebuilt in 2026."})
    html = response.content.decode()
    assert response.status_code == 200 and "<title>Mark “Parking.md” outdated?" in html
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))
    assert "send 2 verified answers to “Needs review”" in text
    assert "Who issues garage permits? · verified by Olivia Owner" in text and "Where is the garage?" in text
    assert "put a warning on its citations in 1 answer," in text
    assert "Garage rebuilt in 2026." in text
    assert 'name="confirm" value="1"' in html and f'href="{reverse("routing:question", args=[item.pk])}">Cancel' in html
    await unchanged()

    # No note (or only spaces, or confirmed without one): the form again, saying so, document kept.
    for data in ({"document": PARKING_DOC, "note": "  "}, {"document": PARKING_DOC, "confirm": "1"}):
        response = await post(owner, url, data)
        html = response.content.decode()
        assert response.status_code == 400 and "Write a note on why it is outdated" in html
        assert f'<option value="{PARKING_DOC}" selected>' in html and 'aria-invalid="true"' in html
        await unchanged()

    # With htmx: the card comes back in place, asking; confirming redirects the page.
    response = await post(owner, url, {"document": PARKING_DOC, "note": "Garage rebuilt in 2026."}, **HTMX)
    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith('<section class="card review-card outdated-card"')
    assert "2 verified answers" in html and "<html" not in html
    await unchanged()
    response = await post(
        owner, url, {"document": PARKING_DOC, "note": "Garage rebuilt in 2026.", "confirm": "1"}, **HTMX
    )
    assert response.status_code == 200 and response["HX-Redirect"] == reverse("routing:question", args=[item.pk])
    doc = await sync_to_async(Document.objects.get)(pk=PARKING_DOC)
    assert doc.outdated_at is not None and doc.outdated_note == "Garage rebuilt in 2026."
    assert {(await reload(v)).status for v in (relying, published)} == {"needs_review"}
    assert (await reload(item)).resolution == "outdated"


async def test_dismiss_with_a_note_shows_on_my_questions_only(
    asker, owner, second_asker, corpus, fake_ollama, mailoutbox
):
    session, answer = await cited_answer(asker, fake_ollama)
    await post(asker, vote_url(answer), {"vote": "-1", "reason": "wrong"})
    [item] = await items()
    mailoutbox.clear()
    url = reverse("routing:review_dismiss", args=[item.pk])
    assert (await post(second_asker, url, {"note": "x"})).status_code == 404
    assert (await post(asker, url, {"note": "x"})).status_code == 404
    # A note is required.
    response = await post(owner, url, {"note": "  "})
    assert response.status_code == 302 and (await reload(item)).status == "open"

    response = await post(owner, url, {"note": "The permit rules are unchanged."})
    assert response.status_code == 302
    item = await reload(item)
    assert item.status == "closed" and item.resolution == "dismissed"
    assert mailoutbox == []  # the asker is not messaged
    assert await Message.objects.filter(session=session, role="owner").acount() == 0
    mine = (await get(asker, reverse("routing:mine"))).content.decode()
    assert "Reviewed: dismissed" in mine and "The permit rules are unchanged." in mine
    # Resolved: other actions are refused with a message, nothing changes.
    await post(owner, reverse("routing:review_outdated", args=[item.pk]), {"document": PARKING_DOC})
    await post(
        owner,
        reverse("routing:review_outdated", args=[item.pk]),
        {"document": PARKING_DOC, "note": "n", "confirm": "1"},
    )
    assert (await sync_to_async(Document.objects.get)(pk=PARKING_DOC)).outdated_at is None


async def test_review_actions_404_on_routed_questions(asker, owner, corpus, fake_ollama):
    low_confidence(fake_ollama)
    _, draft = await ask(asker, PARKING_Q)
    routed = await RoutedQuestion.objects.aget(message=draft)
    for name in ("routing:review_dismiss", "routing:review_outdated"):
        response = await post(owner, reverse(name, args=[routed.pk]), {"note": "n", "document": PARKING_DOC})
        assert response.status_code == 404
    assert (await reload(routed)).status == "open"
