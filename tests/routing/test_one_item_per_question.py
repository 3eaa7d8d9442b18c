"""One question, one item (issue 38, items 1 and 2): a question sent to a person is one item in their
inbox, whatever the asker does next — down-votes its draft, asks the owner after a down vote,
regenerates the answer — and one answer settles it everywhere it shows: the owner's inbox, the
asker's chat notice, "My questions", and the knowledge-gap report.

Answers come from the real chat websocket (fake Ollama, hashing embedder, embedded Qdrant); votes,
answers and pages go through the real views."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.urls import reverse
from django.utils import timezone

from chat import turns
from chat.models import ChatSession, Message
from ragchat.mail import wait_sent
from routing import figures
from routing.models import RoutedQuestion
from routing.services import question_answer
from tests.chat.conftest import open_tab
from tests.routing.conftest import PARKING_Q, ask, client_for, high_confidence, low_confidence

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("drain_turns")]

UNVERIFIED = "Treat this draft as unverified until they answer."


@sync_to_async
def post(user, url, data=None, **extra):
    response = client_for(user).post(url, data or {}, **extra)
    assert wait_sent()
    return response


@sync_to_async
def page(user, url) -> str:
    response = client_for(user).get(url)
    assert response.status_code == 200
    return response.content.decode()


@sync_to_async
def items() -> list[RoutedQuestion]:
    return list(RoutedQuestion.objects.select_related("feedback").order_by("id"))


@sync_to_async
def report(user):
    now = timezone.now()
    tag = figures.report_tag(user=user, slug="facilities")
    return figures.tag_report(user=user, tag=tag, since=now - timedelta(days=1), until=now + timedelta(minutes=1))


def vote_url(message) -> str:
    return reverse("routing:feedback", args=[message.pk])


async def regenerate(user, session: ChatSession, answer: Message) -> Message:
    tab = await open_tab(user, session.pk)
    assert await tab.connect()
    await tab.send({"regenerate": str(answer.pk)})
    while "2 / 2" not in await tab.until_final():  # the first answer re-renders as version 1 first
        pass
    await turns.wait_idle()
    assert wait_sent()
    await tab.close()
    return await Message.objects.filter(session=session, role="assistant").order_by("-id").afirst()


async def assert_settled_everywhere(asker, owner, session, answer_text: str) -> None:
    """The asker's chat, "My questions", the owner's inbox and the report all say: answered."""
    chat = await page(asker, reverse("chat:session", args=[session.pk]))
    assert answer_text in chat and UNVERIFIED not in chat
    assert "answered your question: their answer is below." in chat
    mine = await page(asker, reverse("routing:mine"))
    assert mine.count('class="inbox-row') == 1 and "Waiting for" not in mine and "Answered" in mine
    inbox = await page(owner, reverse("routing:inbox"))
    assert PARKING_Q not in inbox.split('id="inbox-list"')[1].split("</ul>")[0]
    data = await report(owner)
    assert data.unanswered == [] and data.open == 0 and data.answered_by_person == 1
    assert data.asked == 1 and data.outcomes[figures.ROUTED] == 1


async def test_a_down_vote_on_a_routed_draft_joins_its_question(asker, owner, corpus, fake_ollama, mailoutbox):
    low_confidence(fake_ollama)
    session, draft = await ask(asker, PARKING_Q)
    [routed] = await items()
    mailoutbox.clear()

    response = await post(asker, vote_url(draft), {"vote": "-1", "reason": "wrong", "comment": "Not the garage."})
    assert response.status_code == 302
    # Still one item: the routed question, now carrying the down vote (no second email either).
    [item] = await items()
    assert item.pk == routed.pk and item.origin == "route" and item.status == "open"
    assert item.feedback.reason == "wrong" and mailoutbox == []
    inbox = await page(owner, reverse("routing:inbox"))
    assert inbox.count(PARKING_Q) == 1 and "Down-voted: wrong" in inbox
    detail = await page(owner, reverse("routing:question", args=[item.pk]))
    assert "Down-voted: wrong" in detail and "Not the garage." in detail

    # Taking the vote back takes it off the question; voting again puts it back.
    await post(asker, vote_url(draft), {"vote": "0"})
    assert (await items())[0].feedback_id is None
    await post(asker, vote_url(draft), {"vote": "-1", "reason": "incomplete"})
    [item] = await items()
    assert item.feedback.reason == "incomplete"

    # One answer settles it everywhere.
    response = await post(owner, reverse("routing:question", args=[item.pk]), {"answer": "Ask at reception."})
    assert response.status_code == 302
    await assert_settled_everywhere(asker, owner, session, "Ask at reception.")
    assert await Message.objects.filter(session=session, role="owner").acount() == 1


async def test_a_routed_question_and_a_review_item_of_one_answer_settle_together(
    asker, owner, corpus, fake_ollama, mailoutbox
):
    """Two items of one question, as databases hold them from before the rule: answering the
    review item answers the routed question too, with the one message delivered."""
    low_confidence(fake_ollama)
    session, draft = await ask(asker, PARKING_Q)
    [routed] = await items()
    from chat.models import AnswerFeedback

    feedback = await AnswerFeedback.objects.acreate(message=draft, user=asker, vote=-1, reason="wrong")
    review = await RoutedQuestion.objects.acreate(
        tenant_id="default",
        asker=asker,
        session=session,
        message=draft,
        question_message_id=draft.reply_to_id,
        tag_id=routed.tag_id,
        target=owner,
        reason="Review: Routing to facilities owner",
        origin="feedback",
        feedback=feedback,
        question=PARKING_Q,
        draft=draft.content,
    )
    mailoutbox.clear()
    await sync_to_async(question_answer)(question=review, user=owner, text="Ask at reception.")
    assert await sync_to_async(wait_sent)()  # the answer's email, queued to the mail thread
    routed, review = await items()
    assert (routed.status, routed.resolution) == ("answered", "answered")
    assert (review.status, review.resolution) == ("answered", "corrected")
    assert routed.answer_message_id == review.answer_message_id is not None
    assert await Message.objects.filter(session=session, role="owner").acount() == 1
    assert len(mailoutbox) == 1  # one answer, one email
    chat = await page(asker, reverse("chat:session", args=[session.pk]))
    assert "Ask at reception." in chat and UNVERIFIED not in chat
    data = await report(owner)
    assert data.unanswered == [] and data.open == 0


async def test_asking_the_owner_after_a_down_vote_makes_the_review_item_the_question(
    asker, owner, corpus, fake_ollama, mailoutbox
):
    high_confidence(fake_ollama)
    session, answer = await ask(asker, PARKING_Q)
    await post(asker, vote_url(answer), {"vote": "-1", "reason": "outdated", "comment": "The desk moved."})
    [review] = await items()
    assert review.origin == "feedback"

    response = await post(asker, reverse("routing:escalate", args=[answer.pk]))
    assert response.status_code == 302
    [item] = await items()
    assert item.pk == review.pk and item.origin == "manual" and item.status == "open"
    assert item.feedback.reason == "outdated" and item.reason.startswith("Asked the owner: ")
    chat = await page(asker, reverse("chat:session", args=[session.pk]))
    assert "You asked Olivia Owner, the owner of Facilities." in chat
    inbox = await page(owner, reverse("routing:inbox"))
    assert inbox.count(PARKING_Q) == 1 and "Asked the owner" in inbox and "Down-voted: outdated" in inbox

    await post(owner, reverse("routing:question", args=[item.pk]), {"answer": "Ask at reception."})
    await assert_settled_everywhere(asker, owner, session, "Ask at reception.")


async def test_regenerating_a_routed_answer_does_not_route_it_again(asker, owner, corpus, fake_ollama, mailoutbox):
    low_confidence(fake_ollama)
    session, draft = await ask(asker, PARKING_Q)
    [routed] = await items()
    mailoutbox.clear()

    low_confidence(fake_ollama)
    second = await regenerate(asker, session, draft)
    assert second.pk != draft.pk and second.action == "ROUTE" and second.reply_to_id == draft.reply_to_id
    # The same question: one routed question, no second email, one row on "My questions".
    [item] = await items()
    assert item.pk == routed.pk and mailoutbox == []
    mine = await page(asker, reverse("routing:mine"))
    assert mine.count(PARKING_Q) == 1
    detail = await page(owner, reverse("routing:question", args=[item.pk]))
    assert "Asked 2 times" not in detail
    await post(asker, vote_url(second), {"vote": "1"})
    data = await report(owner)
    assert data.asked == 1 and data.outcomes[figures.ROUTED] == 1 and len(data.unanswered) == 1
    assert (data.votes, data.down_votes) == (1, 0)  # a vote on any version counts
    # The new version says who the question went to, as the first did.
    chat = await page(asker, reverse("chat:session", args=[session.pk]))
    assert chat.count("Your question was sent to Olivia Owner, the owner of Facilities.") == 2

    # "Ask the owner" on the new version finds the same question.
    await post(asker, reverse("routing:escalate", args=[second.pk]))
    assert [i.pk for i in await items()] == [routed.pk]

    await post(owner, reverse("routing:question", args=[item.pk]), {"answer": "Ask at reception."})
    await assert_settled_everywhere(asker, owner, session, "Ask at reception.")


async def test_a_regenerated_answer_is_not_a_second_question_in_the_report(asker, owner, corpus, fake_ollama):
    high_confidence(fake_ollama)
    session, answer = await ask(asker, PARKING_Q)
    high_confidence(fake_ollama)
    second = await regenerate(asker, session, answer)
    await post(asker, vote_url(second), {"vote": "-1", "reason": "incomplete"})
    data = await report(owner)
    assert data.asked == 1 and data.outcomes[figures.ASSISTANT] == 1
    assert (data.votes, data.down_votes) == (1, 1)  # a vote on any version counts
    by_tag = await sync_to_async(figures.questions_by_tag)(
        tenant_id="default", since=timezone.now() - timedelta(days=1), until=timezone.now() + timedelta(minutes=1)
    )
    assert len(by_tag["facilities"]) == 1
