"""The notification settings page in a real browser (Debian's Chromium, real daphne): reached from
the bell's list in the top bar on desktop and phone, the switches and the digest choice work by mouse and
keyboard, and what is saved is what the person chose. Screenshots go to test-artifacts/ (or
RAGCHAT_SHOTS_DIR)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.browser.conftest import ARTIFACTS, seeded_server, sign_in

pytestmark = pytest.mark.browser

SETUP = """
from ragchat.models import User
from documents.models import Tag
olivia = User.objects.create_user("olivia", password="pw-olivia-12345", email="olivia@example.com",
                                  first_name="Olivia", last_name="Owner")
User.objects.create_user("erin", password="pw-erin-12345", email="erin@example.com", first_name="Erin")
Tag.objects.create(name="Facilities", slug="facilities", owner=olivia)
"""

SAVED = (
    "import json\nfrom routing.models import NotificationPreference as P\n"
    "print(json.dumps(list(P.objects.filter(user__username='olivia').values("
    "'email_questions', 'email_reviews', 'email_reminders', 'email_answers', 'digest'))))"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory, ollama_server):
    live = seeded_server(tmp_path_factory, ollama_server, name="notify", setup=SETUP)
    yield live
    live.stop()


def shots_dir() -> Path:
    path = Path(os.environ.get("RAGCHAT_SHOTS_DIR") or ARTIFACTS)
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.mark.parametrize(("width", "height", "label"), [(1280, 900, "desktop"), (390, 844, "phone")])
def test_owner_chooses_what_they_receive(server, chromium, width, height, label):
    context = chromium.new_context(viewport={"width": width, "height": height}, is_mobile=label == "phone")
    page = context.new_page()
    sign_in(page, server.url, "olivia", "pw-olivia-12345")
    bell = page.get_by_role("link", name="What's new")
    assert bell.is_visible()  # the person's name hides on phones; the bell does not
    bell.click()
    page.wait_for_url(server.url + "/routing/whats-new/")
    page.get_by_role("link", name="Notification settings").click()
    page.wait_for_url(server.url + "/routing/notifications/")
    assert page.get_by_role("heading", name="Notifications", level=1).is_visible()
    page.screenshot(path=str(shots_dir() / f"notify-{label}-{width}.png"), full_page=True)

    reminders = page.get_by_label("Reminders when an item waits")
    assert reminders.is_checked()
    page.get_by_text("Reminders when an item waits", exact=False).click()  # the label toggles the switch
    assert not reminders.is_checked()
    page.get_by_label("Review items").focus()
    page.keyboard.press("Space")  # and the keyboard does too
    assert not page.get_by_label("Review items").is_checked()
    page.get_by_text("Daily digest", exact=True).last.click()
    assert page.get_by_label("Daily digest", exact=True).is_checked()
    page.get_by_role("button", name="Save settings").click()
    page.wait_for_url(server.url + "/routing/notifications/")
    assert page.get_by_text("Notification settings saved.").is_visible()
    assert not page.get_by_label("Reminders when an item waits").is_checked()
    assert page.get_by_label("Daily digest", exact=True).is_checked()
    page.screenshot(path=str(shots_dir() / f"notify-{label}-{width}-saved.png"), full_page=True)
    [saved] = json.loads(server.shell(SAVED).strip().splitlines()[-1])
    assert saved == {
        "email_questions": True,
        "email_reviews": False,
        "email_reminders": False,
        "email_answers": True,
        "digest": "daily",
    }
    # Back to the defaults for the other width's run.
    server.shell("from routing.models import NotificationPreference as P\nP.objects.all().delete()")
    context.close()


def test_someone_without_an_inbox_sees_only_their_own_answers_switch(server, chromium):
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    sign_in(page, server.url, "erin", "pw-erin-12345")
    page.goto(server.url + "/routing/notifications/")
    assert page.get_by_label("Answers and corrections to my questions").is_checked()
    assert page.get_by_text("New questions routed to me").count() == 0
    assert page.get_by_text("Daily digest").count() == 0
    page.screenshot(path=str(shots_dir() / "notify-asker-1280.png"), full_page=True)
    context.close()
