"""Notifications owners notice (issue 13): the preferences page, new-question and review-item emails,
reminders past the target time, the daily digest, `manage.py send_reminders`, and that each one
reaches only people who may open the item. Real database, Django's locmem email backend."""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from chat.models import AnswerFeedback, ChatSession, Message
from documents.models import Tag
from routing import reminders
from routing.models import NotificationPreference, RoutedQuestion, VerifiedAnswer
from routing.services import notify_new_question, question_answer
from tests.routing.conftest import client_for

pytestmark = pytest.mark.django_db


def at(hour: int = 10, day: int = 25) -> datetime:
    """A fixed clock: 25 Nov 2026, 10:00 local time by default (after the default digest hour, 7)."""
    return timezone.make_aware(datetime(2026, 11, day, hour, 0))


def make_question(
    *, asker, tag, text, hours_ago, target=None, fallback=False, origin="route", feedback=None, group=None
) -> RoutedQuestion:
    session = ChatSession.objects.create(owner=asker)
    q = RoutedQuestion.objects.create(
        asker=asker,
        session=session,
        tag=tag,
        target=target,
        fallback=fallback,
        origin=origin,
        feedback=feedback,
        question=text,
        reason="Routing to the owner" if not fallback else "No owner for tag - routing to admin",
        group=group,
    )
    RoutedQuestion.objects.filter(pk=q.pk).update(created_at=at() - timedelta(hours=hours_ago))
    q.refresh_from_db()
    return q


def review_item(*, asker, tag, owner, text, hours_ago=1, reason="outdated", comment="The form changed in May."):
    session = ChatSession.objects.create(owner=asker)
    user_msg = Message.objects.create(session=session, role="user", content=text)
    answer = Message.objects.create(
        session=session, role="assistant", content="Ask the front desk on floor 2.", reply_to=user_msg
    )
    feedback = AnswerFeedback.objects.create(message=answer, user=asker, vote=-1, reason=reason, comment=comment)
    q = make_question(
        asker=asker, tag=tag, text=text, hours_ago=hours_ago, target=owner, origin="feedback", feedback=feedback
    )
    RoutedQuestion.objects.filter(pk=q.pk).update(message=answer, draft=answer.content)
    return q


def needs_review(*, tag, text, hours_ago, by=None):
    v = VerifiedAnswer.objects.create(
        tag=tag,
        question=text,
        answer="Verified answer text.",
        verified_by=by,
        verified_at=at() - timedelta(days=200),
        review_by=(at() - timedelta(days=20)).date(),
    )
    v.status = VerifiedAnswer.Status.NEEDS_REVIEW
    v.needs_review_reason = "The review date passed"
    v.needs_review_since = at() - timedelta(hours=hours_ago)
    v.save()
    return v


def prefs(user, **values) -> NotificationPreference:
    pref, _ = NotificationPreference.objects.update_or_create(user=user, defaults=values)
    return pref


def to(mail) -> list[str]:
    return sorted(mail.to)


# ------------------------------------------------------------------------------------- the page


def test_preferences_page_shows_and_saves_ones_own(owner, stranger, tags):
    client = client_for(owner)
    page = client.get(reverse("routing:notifications"))
    assert page.status_code == 200
    html = page.content.decode()
    for label in ("New questions routed to me", "Review items", "Reminders when an item waits", "Daily digest"):
        assert label in html
    assert "olivia@example.com" in html
    assert 'href="/routing/whats-new/"' in html  # the bell in the top bar, whose list links here
    # Every switch defaults on; the digest off.
    assert html.count('type="checkbox"') == 4 and html.count("checked") == 5  # 4 switches + "No digest"

    prefs(stranger, email_questions=True, digest="daily")
    response = client.post(
        reverse("routing:notifications"),
        {"email_questions": "on", "email_answers": "on", "digest": "daily", "user": stranger.pk},
    )
    assert response.status_code == 302 and response["Location"] == reverse("routing:notifications")
    mine = NotificationPreference.objects.get(user=owner)
    assert (mine.email_questions, mine.email_reviews, mine.email_reminders, mine.email_answers, mine.digest) == (
        True,
        False,
        False,
        True,
        "daily",
    )
    # The other person's row is untouched (their id in the form means nothing).
    theirs = NotificationPreference.objects.get(user=stranger)
    assert theirs.email_questions is True and theirs.digest == "daily" and theirs.email_reviews is True
    page = client.get(reverse("routing:notifications")).content.decode()
    assert "Notification settings saved." in page


def test_the_bell_lists_what_is_new_for_each_person_and_counts_it(asker, owner, stranger, tags):
    """The asker's unread answers; what waits for the owner (an open question, a review item, verified
    knowledge to re-verify); nothing of anyone else's. The bell's badge counts the list."""
    waiting = make_question(
        asker=asker, tag=tags["facilities"], text="Where is the bike room?", hours_ago=2, target=owner
    )
    review_item(asker=asker, tag=tags["facilities"], owner=owner, text="Visitor badges?")
    needs_review(tag=tags["facilities"], text="Canteen opening hours", hours_ago=30, by=owner)
    answered = make_question(asker=asker, tag=tags["facilities"], text="Weekend parking?", hours_ago=3, target=owner)
    question_answer(question=answered, user=owner, text="Yes, with a day permit.")

    def bell(user) -> tuple[str, str]:
        page = client_for(user).get(reverse("routing:whats_new"))
        assert page.status_code == 200
        html = page.content.decode()
        count = html.split('id="nav-bell-count"', 1)[1].split("</span>", 1)[0]
        return html, count

    html, count = bell(asker)
    assert 'id="answers-title"' in html and "Weekend parking?" in html and "Olivia Owner" in html
    assert "Where is the bike room?" not in html and 'id="waiting-title"' not in html
    assert count.endswith(">1") and " hidden" not in count
    assert 'href="/routing/notifications/"' in html  # the list links to the settings

    html, count = bell(owner)
    for text in ("Waiting for you", "Where is the bike room?", "Visitor badges?", "Canteen opening hours"):
        assert text in html
    assert "Weekend parking?" not in html and 'id="answers-title"' not in html
    assert count.endswith(">3")  # two open items and one answer to re-verify
    assert f'href="{reverse("routing:question", args=[waiting.pk])}"' in html

    html, count = bell(stranger)
    assert "Nothing new" in html and count.endswith(" hidden>0")
    for text in ("Where is the bike room?", "Visitor badges?", "Canteen opening hours", "Weekend parking?"):
        assert text not in html
    # Reading the answer (opening its chat) takes it off the asker's list.
    client_for(asker).get(reverse("chat:session", args=[answered.session_id]))
    html, count = bell(asker)
    assert "Weekend parking?" not in html and "Nothing new" in html and count.endswith(" hidden>0")


def test_someone_without_an_inbox_chooses_only_answer_emails(stranger, owner, tags):
    prefs(stranger, email_reminders=False)  # an earlier choice the page does not show them
    client = client_for(stranger)
    html = client.get(reverse("routing:notifications")).content.decode()
    assert "Answers and corrections to my questions" in html
    assert "New questions routed to me" not in html and "Daily digest" not in html
    assert client.post(reverse("routing:notifications"), {}).status_code == 302
    pref = NotificationPreference.objects.get(user=stranger)
    assert pref.email_answers is False and pref.email_reminders is False and pref.email_questions is True


def test_bad_input_gets_a_clear_message_and_changes_nothing(owner, tags):
    prefs(owner, email_reviews=True, digest="off")
    client = client_for(owner)
    response = client.post(reverse("routing:notifications"), {"email_reviews": "", "digest": "hourly"})
    assert response.status_code == 400
    assert "Select a valid choice" in response.content.decode()
    pref = NotificationPreference.objects.get(user=owner)
    assert pref.email_reviews is True and pref.digest == "off"


def test_no_email_address_is_said_plainly(django_user_model, tags):
    nobody = django_user_model.objects.create_user(username="noemail", password="pw-noemail-1")
    html = client_for(nobody).get(reverse("routing:notifications")).content.decode()
    assert "Your account has no email address" in html


# ------------------------------------------------------------------------------------- new items


def test_new_question_email_follows_the_owners_choice(asker, owner, tags, mailoutbox, settings):
    settings.RAGCHAT_BASE_URL = "https://chat.example.com"
    q = make_question(asker=asker, tag=tags["facilities"], target=owner, text="Where do I park?", hours_ago=0)
    prefs(owner, email_questions=False)
    notify_new_question(question_id=q.pk)
    assert mailoutbox == []
    prefs(owner, email_questions=True, email_reviews=False)
    notify_new_question(question_id=q.pk)
    [mail] = mailoutbox
    assert to(mail) == ["olivia@example.com"] and mail.subject == "[ragchat] New question about Facilities"
    assert mail.body.startswith("A question was routed to you: Erin Asker asked")
    assert "Where do I park?" in mail.body
    assert f"https://chat.example.com/routing/q/{q.pk}/" in mail.body


def test_a_mail_server_outage_is_logged_not_raised(asker, owner, tags, mailoutbox, settings, caplog):
    settings.EMAIL_BACKEND = "tests.fakes.mail.BrokenBackend"
    q = make_question(asker=asker, tag=tags["facilities"], target=owner, text="Where do I park?", hours_ago=0)
    with caplog.at_level(logging.ERROR, logger="routing.notifications"):
        notify_new_question(question_id=q.pk)  # no server loop here: sent, and failed, before it returns
    [record] = [r for r in caplog.records if r.name == "routing.notifications"]
    assert record.getMessage() == "routing: email failed: mail server down"
    assert record.levelno == logging.ERROR and record.event == "routing_email_failed"
    assert mailoutbox == []


def test_review_item_email_says_an_answer_was_down_voted(asker, owner, tags, mailoutbox):
    q = review_item(asker=asker, tag=tags["facilities"], owner=owner, text="How do I renew my parking permit?")
    prefs(owner, email_reviews=False)
    notify_new_question(question_id=q.pk)
    assert mailoutbox == []
    prefs(owner, email_reviews=True, email_questions=False)  # a review item is not a "question" email
    notify_new_question(question_id=q.pk)
    [mail] = mailoutbox
    assert to(mail) == ["olivia@example.com"]
    assert mail.subject == "[ragchat] Answer down-voted: Facilities (outdated)"
    assert mail.body.startswith("An answer was down-voted: Erin Asker found the assistant's answer about Facilities")
    assert "Reason: Outdated" in mail.body and "Comment: The form changed in May." in mail.body
    assert "How do I renew my parking permit?" in mail.body
    # What came from documents (the down-voted answer) stays on the page, shown as the reader may see it.
    assert "front desk" not in mail.body


def test_admin_fallback_still_reaches_the_admins(asker, admin_user, django_user_model, tags, mailoutbox, settings):
    q = make_question(asker=asker, tag=tags["it"], fallback=True, text="Who fixes the printer?", hours_ago=0)
    notify_new_question(question_id=q.pk)
    assert [to(m) for m in mailoutbox] == [["root@example.com"]]
    mailoutbox.clear()
    # No admin has an address: the configured admin mailbox receives it.
    type(admin_user).objects.filter(pk=admin_user.pk).update(email="")
    notify_new_question(question_id=q.pk)
    assert [to(m) for m in mailoutbox] == [[settings.RAG.rag_admin_email]]


# ------------------------------------------------------------------------------------- reminders


def test_a_question_past_its_target_reminds_its_owner_once_per_target_period(asker, owner, tags, mailoutbox):
    facilities = tags["facilities"]
    Tag.objects.filter(pk=facilities.pk).update(target_hours=4)
    late = make_question(asker=asker, tag=facilities, target=owner, text="Where do I park my bike?", hours_ago=5)
    make_question(asker=asker, tag=facilities, target=owner, text="Is the garage open on Sunday?", hours_ago=1)

    assert reminders.run_due(at()) == {"reminders": 1, "digests": 0}
    [mail] = mailoutbox
    assert to(mail) == ["olivia@example.com"]
    assert mail.subject == "[ragchat] Reminder: 1 item waiting past the target time"
    assert "Where do I park my bike?" in mail.body and "waiting 5.0 h" in mail.body
    assert "Is the garage open on Sunday?" not in mail.body  # within its target
    late.refresh_from_db()
    assert late.reminded_at == at()

    # Again at once, or an hour later: nothing more. One target period after the reminder: once more
    # (the other question is due by then too, in the same email).
    assert reminders.run_due(at()) == {"reminders": 0, "digests": 0}
    assert reminders.run_due(at(11)) == {"reminders": 0, "digests": 0}
    assert reminders.run_due(at(14)) == {"reminders": 1, "digests": 0}
    assert len(mailoutbox) == 2
    assert "Where do I park my bike?" in mailoutbox[1].body and "Is the garage open on Sunday?" in mailoutbox[1].body


def test_reminders_respect_the_choice_and_skip_answered_items(asker, owner, tags, mailoutbox):
    Tag.objects.filter(pk=tags["facilities"].pk).update(target_hours=1)
    q = make_question(asker=asker, tag=tags["facilities"], target=owner, text="Where do I park?", hours_ago=2)
    answered = make_question(asker=asker, tag=tags["facilities"], target=owner, text="Answered one?", hours_ago=9)
    question_answer(question=answered, user=owner, text="Here.")
    mailoutbox.clear()
    prefs(owner, email_reminders=False)
    assert reminders.run_due(at())["reminders"] == 0
    assert mailoutbox == []
    q.refresh_from_db()
    assert q.reminded_at == at()  # it was due: their choice is not to be told


def test_a_reminder_goes_to_the_tags_current_owner_never_to_one_who_lost_it(
    asker, owner, django_user_model, admin_user, tags, mailoutbox, settings
):
    settings.RAGCHAT_FALLBACK_TARGET_HOURS = 24
    facilities = tags["facilities"]
    q = make_question(asker=asker, tag=facilities, target=owner, text="Who cleans the garage?", hours_ago=50)
    successor = django_user_model.objects.create_user(username="nina", email="nina@example.com", password="pw-nina-1")
    Tag.objects.filter(pk=facilities.pk).update(owner=successor)
    reminders.run_due(at())
    [mail] = mailoutbox
    assert to(mail) == ["nina@example.com"] and "Who cleans the garage?" in mail.body

    # Nobody owns it any more: the admins are reminded, after the fallback target.
    Tag.objects.filter(pk=facilities.pk).update(owner=None)
    mailoutbox.clear()
    assert reminders.run_due(at(hour=10) + timedelta(hours=23))["reminders"] == 0
    assert reminders.run_due(at(hour=10) + timedelta(hours=24))["reminders"] == 1
    assert [to(m) for m in mailoutbox] == [["root@example.com"]]
    assert owner.email not in str([m.to for m in mailoutbox])
    q.refresh_from_db()
    assert q.reminded_at == at() + timedelta(hours=24)


def test_verified_knowledge_needing_review_reminds_its_owner_once(owner, stranger, tags, mailoutbox):
    Tag.objects.filter(pk=tags["facilities"].pk).update(target_hours=48)
    v = needs_review(tag=tags["facilities"], text="How many parking spaces are there?", hours_ago=49)
    needs_review(tag=tags["facilities"], text="Recently flagged?", hours_ago=2)
    mailoutbox.clear()  # the "needs review" emails themselves
    assert reminders.run_due(at())["reminders"] == 1
    [mail] = mailoutbox
    assert to(mail) == ["olivia@example.com"]
    assert "Needs review · Facilities · waiting 2.0 d" in mail.body and "How many parking spaces" in mail.body
    assert "(The review date passed)" in mail.body and "Recently flagged?" not in mail.body
    assert reminders.run_due(at())["reminders"] == 0
    v.refresh_from_db()
    assert v.reminded_at == at()


def test_two_runs_at_once_remind_once(asker, owner, tags, mailoutbox):
    """Process B read the item before process A claimed it: B's claim finds reminded_at changed."""
    Tag.objects.filter(pk=tags["facilities"].pk).update(target_hours=1)
    q = make_question(asker=asker, tag=tags["facilities"], target=owner, text="Where do I park?", hours_ago=3)
    stale = RoutedQuestion.objects.get(pk=q.pk)  # B's read
    assert reminders._claim(RoutedQuestion, q, at(), status="open") is True  # A
    assert reminders._claim(RoutedQuestion, stale, at(), status="open") is False  # B
    assert reminders.run_due(at())["reminders"] == 0 and mailoutbox == []


@pytest.mark.django_db(transaction=True)
def test_concurrent_runs_in_threads_send_one_reminder_and_one_digest(asker, owner, tags, mailoutbox):
    Tag.objects.filter(pk=tags["facilities"].pk).update(target_hours=1)
    make_question(asker=asker, tag=tags["facilities"], target=owner, text="Where do I park?", hours_ago=3)
    prefs(owner, digest="daily")
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            if connection.vendor == "sqlite":
                # The test database is SQLite's shared-cache in-memory one, where reading a table
                # another connection is writing fails at once ("database table is locked"; CI saw
                # it under load). The deployed file database in WAL mode lets readers read; here
                # reading uncommitted rows keeps the reads from failing. The claims stay
                # conditional updates, which is what this test is about.
                with connection.cursor() as cursor:
                    cursor.execute("PRAGMA read_uncommitted = 1")
            start.wait(5)
            reminders.run_due(at())
        except BaseException as e:
            errors.append(e)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    subjects = sorted(m.subject for m in mailoutbox)
    assert subjects == [
        "[ragchat] Reminder: 1 item waiting past the target time",
        "[ragchat] Your daily digest: 1 item waiting",
    ]


# ------------------------------------------------------------------------------------- digest


def test_daily_digest_lists_what_waits_for_the_person_and_only_that(
    asker, owner, stranger, admin_user, django_user_model, tags, mailoutbox, settings
):
    settings.RAGCHAT_BASE_URL = "https://chat.example.com"
    facilities = tags["facilities"]
    hr = Tag.objects.create(name="HR", slug="hr", owner=stranger)
    old = make_question(asker=asker, tag=facilities, target=owner, text="Where do I park overnight?", hours_ago=30)
    new = make_question(asker=asker, tag=facilities, target=owner, text="Is there EV charging?", hours_ago=2)
    review = review_item(asker=asker, tag=facilities, owner=owner, text="Renew my permit?", hours_ago=5)
    needs_review(tag=facilities, text="How many spaces in the garage?", hours_ago=70)
    make_question(asker=asker, tag=hr, target=stranger, text="Secret HR question?", hours_ago=40)
    make_question(asker=asker, tag=tags["it"], fallback=True, text="Admins' printer question?", hours_ago=3)
    pref = prefs(owner, digest="daily", last_digest_at=at() - timedelta(hours=20))
    prefs(asker, digest="daily")  # nothing waits for the asker: no email
    mailoutbox.clear()

    assert reminders.run_due(at(hour=6))["digests"] == 0  # before the digest hour: yesterday's slot was taken
    assert reminders.run_due(at())["digests"] == 1
    [mail] = [m for m in mailoutbox if "digest" in m.subject]
    assert to(mail) == ["olivia@example.com"]
    assert mail.subject == "[ragchat] Your daily digest: 4 items waiting"
    body = mail.body
    assert (
        "Waiting for you: 2 questions, 1 review item (down-voted answers), 1 verified answer that needs review." in body
    )
    for text in ("Where do I park overnight?", "Is there EV charging?", "Renew my permit?", "How many spaces"):
        assert text in body
    # Never what the person may not open.
    assert "Secret HR question?" not in body and "Admins' printer question?" not in body
    # Longest waiting first; new since the last digest (20 h ago): the EV and permit ones only.
    longest = body.split("Waiting longest:")[1].split("New since your last digest:")[0]
    assert longest.index("How many spaces") < longest.index("Where do I park overnight?") < longest.index("Renew")
    new_part = body.split("New since your last digest:")[1]
    assert "Is there EV charging?" in new_part and "Renew my permit?" in new_part
    assert "Where do I park overnight?" not in new_part and "How many spaces" not in new_part
    assert f"https://chat.example.com/routing/q/{new.pk}/" in new_part and str(review.pk) in body and old.pk
    pref.refresh_from_db()
    assert pref.last_digest_at == at()
    assert NotificationPreference.objects.get(user=asker).last_digest_at == at()  # skipped, but done for today

    # Once a day: not again today, again tomorrow (nothing new by then).
    assert reminders.run_due(at(hour=23))["digests"] == 0
    assert reminders.run_due(at(hour=8, day=26))["digests"] == 1
    assert "Nothing new." in [m for m in mailoutbox if "digest" in m.subject][-1].body


def test_admins_digest_has_the_fallback_items(asker, admin_user, tags, mailoutbox):
    make_question(asker=asker, tag=tags["it"], fallback=True, text="Admins' printer question?", hours_ago=3)
    prefs(admin_user, digest="daily")
    assert reminders.run_due(at())["digests"] == 1
    assert "Admins' printer question?" in mailoutbox[-1].body


def test_no_digest_for_people_who_did_not_choose_it(asker, owner, tags, mailoutbox):
    make_question(asker=asker, tag=tags["facilities"], target=owner, text="Where?", hours_ago=1)
    assert reminders.run_due(at())["digests"] == 0
    prefs(owner, digest="daily")
    type(owner).objects.filter(pk=owner.pk).update(is_active=False)
    assert reminders.run_due(at())["digests"] == 0  # a deactivated account is not written to


# ------------------------------------------------------------------------------------- the command


def test_send_reminders_command(asker, owner, tags, mailoutbox, capsys):
    Tag.objects.filter(pk=tags["facilities"].pk).update(target_hours=2)
    make_question(asker=asker, tag=tags["facilities"], target=owner, text="Where do I park?", hours_ago=3)
    prefs(owner, digest="daily")
    call_command("send_reminders", "--now", "2026-11-25T10:00")
    assert "reminders: 1 email(s); digests: 1 email(s)" in capsys.readouterr().out
    assert len(mailoutbox) == 2
    call_command("send_reminders", "--now", "2026-11-25T10:05")
    assert "reminders: 0 email(s); digests: 0 email(s)" in capsys.readouterr().out
    with pytest.raises(CommandError, match="not a date and time"):
        call_command("send_reminders", "--now", "yesterday")
    assert len(mailoutbox) == 2
