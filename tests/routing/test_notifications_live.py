"""The inbox badge and inbox list over real websockets (the ASGI app, ws/nav/ and ws/inbox/): review
items and verified knowledge that needs review count, and follow creation and resolution live,
only on the pages of people who may open them."""

from __future__ import annotations

import contextlib
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async

from documents.models import Tag
from ragchat.mail import wait_sent
from routing.models import VerifiedAnswer
from routing.services import notify_new_question, question_close
from tests.routing.conftest import open_inbox
from tests.routing.test_notifications import make_question, review_item

pytestmark = pytest.mark.django_db(transaction=True)


def badge(frame: str) -> str | None:
    """The inbox badge's number in a frame (None when the frame has no inbox badge)."""
    marker = 'id="nav-inbox-count"'
    if marker not in frame:
        return None
    tail = frame.split(marker, 1)[1]
    return tail.split(">", 1)[1].split("<", 1)[0]


async def next_badge(tab) -> str:
    while (count := badge(await tab.receive())) is None:
        pass
    return count


@sync_to_async
def set_status(verified: VerifiedAnswer, status: str, *, by=None) -> None:
    """Through the lifecycle's own transitions (routing.knowledge), as the product changes it."""
    from routing import knowledge

    verified.refresh_from_db()
    if status == VerifiedAnswer.Status.NEEDS_REVIEW:
        knowledge.mark_needs_review(verified=verified, reason="A source was replaced")
    else:
        assert status == VerifiedAnswer.Status.RETIRED
        knowledge.retire(verified=verified, user=by)


@sync_to_async
def verified_on(tag: Tag, text: str) -> VerifiedAnswer:
    from django.utils import timezone

    return VerifiedAnswer.objects.create(
        tag=tag, question=text, answer="An answer.", verified_at=timezone.now(), review_by=timezone.now().date()
    )


async def test_review_items_and_needs_review_count_in_the_live_badge(asker, owner, stranger, tags, mailoutbox):
    owner_nav = await open_inbox(owner, "/ws/nav/")
    spy = await open_inbox(stranger, "/ws/nav/")
    assert await owner_nav.connect() and await spy.connect()

    # A down-voted answer lands as a review item: the owner's badge shows it.
    item = await sync_to_async(review_item)(
        asker=asker, tag=tags["facilities"], owner=owner, text="How do I renew my parking permit?"
    )
    await sync_to_async(notify_new_question)(question_id=item.pk)
    assert await next_badge(owner_nav) == "1"
    assert wait_sent()  # queued to the mail thread: this ran under the test's loop
    assert [m.subject for m in mailoutbox] == ["[ragchat] Answer down-voted: Facilities (outdated)"]

    # Verified knowledge on the owner's tag starts needing review: the badge counts it, and the
    # owner is told by email (a "reviews" email).
    verified = await verified_on(tags["facilities"], "How many parking spaces are there?")
    assert await owner_nav.comm.receive_nothing(timeout=0.3)  # verified: nothing waits
    await set_status(verified, VerifiedAnswer.Status.NEEDS_REVIEW)
    assert await next_badge(owner_nav) == "2"
    assert wait_sent()
    mail = mailoutbox[-1]
    assert mail.subject == "[ragchat] Verified answer needs review: Facilities" and mail.to == ["olivia@example.com"]
    assert "A source was replaced" in mail.body and "How many parking spaces are there?" in mail.body

    # Re-verified (or retired): it leaves the count; the review item dismissed: zero, badge hidden.
    await set_status(verified, VerifiedAnswer.Status.RETIRED, by=owner)
    assert await next_badge(owner_nav) == "1"
    await sync_to_async(question_close)(question=item, user=owner)
    frame = await owner_nav.receive()
    while badge(frame) != "0":
        frame = await owner_nav.receive()
    assert " hidden" in frame

    assert await spy.comm.receive_nothing(timeout=0.5)  # the stranger heard none of it
    await owner_nav.close()
    await spy.close()


async def test_inbox_page_frame_counts_questions_and_badge_counts_everything(asker, owner, stranger, tags):
    verified = await verified_on(tags["facilities"], "How many parking spaces are there?")
    await set_status(verified, VerifiedAnswer.Status.NEEDS_REVIEW)
    inbox = await open_inbox(owner)
    assert await inbox.connect()
    item = await sync_to_async(review_item)(
        asker=asker, tag=tags["facilities"], owner=owner, text="How do I renew my parking permit?"
    )
    await sync_to_async(notify_new_question)(question_id=item.pk, email=False)
    frame = await inbox.receive()
    assert f'id="inbox-q{item.pk}"' in frame and "How do I renew my parking permit?" in frame
    assert 'id="inbox-open-count" hx-swap-oob="true">1<' in frame  # the list's own count: questions
    assert badge(frame) == "2"  # the navigation badge: the re-verify item too
    await inbox.close()


async def test_needs_review_without_an_owner_reaches_the_admins_badge_only(asker, owner, admin_user, tags, mailoutbox):
    admin_nav = await open_inbox(admin_user, "/ws/nav/")
    owner_nav = await open_inbox(owner, "/ws/nav/")
    assert await admin_nav.connect() and await owner_nav.connect()
    verified = await verified_on(tags["it"], "Who fixes the printer?")  # "it" has no owner
    await set_status(verified, VerifiedAnswer.Status.NEEDS_REVIEW)
    assert await next_badge(admin_nav) == "1"
    assert wait_sent()
    assert [m.to for m in mailoutbox] == [["root@example.com"]]
    assert await owner_nav.comm.receive_nothing(timeout=0.5)
    await admin_nav.close()
    await owner_nav.close()


async def test_a_new_routed_question_still_updates_the_badge(asker, owner, tags):
    owner_nav = await open_inbox(owner, "/ws/nav/")
    assert await owner_nav.connect()
    q = await sync_to_async(make_question)(
        asker=asker, tag=tags["facilities"], target=owner, text="Where do I park?", hours_ago=0
    )
    await sync_to_async(notify_new_question)(question_id=q.pk, email=False)
    assert await next_badge(owner_nav) == "1"
    await owner_nav.close()


async def test_the_servers_schedule_sends_due_reminders(asker, owner, tags, mailoutbox, settings):
    """With in-process ingestion the server's schedule (documents/schedule.py) runs the reminders too."""
    import asyncio

    from django.utils import timezone

    from documents import schedule
    from routing.models import RoutedQuestion

    settings.RAGCHAT_INGEST_BACKEND = "inprocess"
    settings.RAGCHAT_SCHEDULE_MINUTES = 60
    q = await sync_to_async(make_question)(
        asker=asker, tag=tags["facilities"], target=owner, text="Where do I park?", hours_ago=0
    )
    await RoutedQuestion.objects.filter(pk=q.pk).aupdate(created_at=timezone.now() - timedelta(days=3))
    schedule.start_schedule()
    task = schedule._task
    assert task is not None
    try:
        for _ in range(100):
            if mailoutbox:
                break
            await asyncio.sleep(0.1)
        assert [m.subject for m in mailoutbox] == ["[ragchat] Reminder: 1 item waiting past the target time"]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
