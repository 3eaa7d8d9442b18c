"""The top bar and what it leaves of the screen, at 1280x800 and 390x844 (Debian's Chromium, real
daphne, the app's CSP enforced): on phones the navigation folds behind a Menu button (which opens
with and without script) so that a chat's messages get at least half the screen; the home page's
logo is not hidden under the top bar; a pinned chat is marked with an SVG icon, not an emoji that
needs a font; the bell opens a list of what is new with a badge counting it. Screenshots go to
test-artifacts/."""

from __future__ import annotations

import pytest

from tests.browser.conftest import ARTIFACTS, WIDTHS, csp_signed_in, seeded_server

pytestmark = pytest.mark.browser

PASSWORD = "topbar-pass-123"
ANSWER = "Yes: reception issues weekend day permits for visitors. Ask them on Friday before 4 pm."

SETUP = r"""
from django.utils import timezone
from chat.models import ChatSession, Message
from documents.models import Tag
from ragchat.models import User
from routing.models import RoutedQuestion
from routing.services import question_answer
erin = User.objects.create_user("erin", password=%(pw)r, first_name="Erin", last_name="Walsh",
                                email="erin@example.com")
olivia = User.objects.create_user("olivia", password=%(pw)r, first_name="Olivia", last_name="Owens",
                                  email="olivia@example.com")
facilities = Tag.objects.create(name="Facilities", slug="facilities", owner=olivia)
facilities.members.add(erin)
# An administrator: the most links in the navigation, and six recent chats on the home page.
ada = User.objects.create_superuser("ada", password=%(pw)r, first_name="Ada", last_name="Admin",
                                    email="ada@example.com")
for title in ("Travel expenses for conferences abroad", "Onboarding checklist for new hires",
              "Security training deadlines this quarter", "Parental leave and part-time work",
              "Company car policy and fuel cards"):
    ChatSession.objects.create(owner=ada, title=title)
long = ChatSession.objects.create(owner=ada, title="Parking and the garage", pinned_at=timezone.now())
for n in range(4):
    Message.objects.create(session=long, role="user", content=f"Question number {n + 1} about the garage?")
    Message.objects.create(session=long, role="assistant",
                           content="The garage has 40 spaces for employees. " * 6)
print("LONG", long.pk)

def routed(question_text, session_title):
    session = ChatSession.objects.create(owner=erin, title=session_title)
    asked = Message.objects.create(session=session, role="user", content=question_text)
    draft = Message.objects.create(session=session, role="assistant", content="I am not sure.", reply_to=asked,
                                   action="ROUTE")
    return RoutedQuestion.objects.create(asker=erin, session=session, message=draft, question_message=asked,
                                         tag=facilities, target=olivia, question=question_text)

answered = routed("Can visitors get a parking permit for the garage on weekends?", "Visitor parking")
question_answer(question=answered, user=olivia, text=%(answer)r)
routed("Where is the bike room in the new building?", "Bike room")
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory, ollama_server):
    live = seeded_server(
        tmp_path_factory,
        ollama_server,
        name="topbar-browser",
        setup=SETUP % {"pw": PASSWORD, "answer": ANSWER},
        extra_env={"EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend"},
    )
    yield live
    live.stop()


def _long_chat(server) -> str:
    return next(line.split()[1] for line in server.setup_output.splitlines() if line.startswith("LONG "))


def _box(page, selector: str) -> dict:
    box = page.locator(selector).first.bounding_box()
    assert box, f"{selector} is not on screen"
    return box


@pytest.mark.parametrize(("width", "height"), WIDTHS)
def test_a_chat_on_a_phone_leaves_half_the_screen_to_its_messages(server, chromium, width, height):
    phone = width < 640
    context, page, violations = csp_signed_in(chromium, width, height, server.url, "ada", PASSWORD)
    page.goto(f"{server.url}/chat/{_long_chat(server)}/")
    page.wait_for_selector("#messages .msg")
    page.screenshot(path=str(ARTIFACTS / f"topbar-chat-{'phone' if phone else 'desktop'}.png"))
    messages = _box(page, "#messages")
    top = {sel: _box(page, sel)["height"] for sel in (".topbar", ".chat-head", "#composer")}
    print(f"{width}x{height}: messages {messages['height']:.0f} px", {k: round(v) for k, v in top.items()})
    assert messages["height"] >= height / 2, (messages["height"], top)
    assert messages["y"] + messages["height"] <= height + 1
    links = page.locator("nav.topnav a")
    menu = page.locator(".topbar-menu > summary", has_text="Menu")  # a <summary>: a button to screen readers
    if phone:
        # The navigation folds behind one button on the top bar's only row.
        assert top[".topbar"] <= 64, top
        assert links.first.is_hidden()
        assert menu.is_visible() and not page.evaluate("document.querySelector('.topbar-menu').open")
        menu.click()
        assert page.evaluate("document.querySelector('.topbar-menu').open")
        for link in links.all():
            assert link.is_visible(), link.inner_text()
            box = link.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1, link.inner_text()
        page.screenshot(path=str(ARTIFACTS / "topbar-menu-open-phone.png"))
        page.get_by_role("link", name="Documents").click()
        page.wait_for_url(server.url + "/documents/")
    else:
        assert menu.is_hidden()
        assert [link.inner_text().strip() for link in links.all()][:2] == ["Chat", "Documents"]
        for link in links.all():
            assert link.is_visible(), link.inner_text()
    assert not violations, violations
    context.close()


def test_the_phone_menu_opens_without_script(server, chromium):
    context, page, violations = csp_signed_in(chromium, 390, 844, server.url, "erin", PASSWORD, script=False)
    page.goto(server.url + "/documents/")
    assert page.locator("nav.topnav a").first.is_hidden()
    page.locator(".topbar-menu > summary", has_text="Menu").click()
    assert page.get_by_role("link", name="My questions").is_visible()
    page.screenshot(path=str(ARTIFACTS / "topbar-menu-open-phone-noscript.png"))
    page.get_by_role("link", name="My questions").click()
    page.wait_for_url(server.url + "/routing/mine/")
    assert not violations, violations
    context.close()


@pytest.mark.parametrize(("width", "height"), [*WIDTHS, pytest.param(375, 667, id="small-phone")])
def test_the_home_page_logo_shows_in_full_below_the_top_bar(server, chromium, width, height):
    context, page, violations = csp_signed_in(chromium, width, height, server.url, "ada", PASSWORD)
    page.goto(server.url + "/")
    page.screenshot(path=str(ARTIFACTS / f"topbar-home-{width}x{height}.png"))
    bar = _box(page, ".topbar")
    mark = _box(page, ".welcome-mark")
    assert mark["y"] >= bar["y"] + bar["height"], (mark, bar)
    # And nothing of the welcome sits above its scroll area's top, out of reach.
    hidden_above = page.evaluate(
        "(() => { const s = document.querySelector('.chat-welcome');"
        " return s.querySelector('.welcome').getBoundingClientRect().top - s.getBoundingClientRect().top"
        " + s.scrollTop; })()"
    )
    assert hidden_above >= 0, hidden_above
    assert not violations, violations
    context.close()


@pytest.mark.parametrize(("width", "height"), WIDTHS)
def test_a_pinned_chat_is_marked_with_an_icon_that_needs_no_emoji_font(server, chromium, width, height):
    context, page, violations = csp_signed_in(chromium, width, height, server.url, "ada", PASSWORD)
    page.goto(f"{server.url}/chat/{_long_chat(server)}/")
    if width < 640:
        page.locator(".chat-head .chat-drawer-toggle").click()
    entry = page.locator("#chat-sidebar .session-link", has_text="Parking and the garage")
    mark = entry.get_by_role("img", name="Pinned")
    assert mark.evaluate("e => e.tagName.toLowerCase()") == "svg"
    box = mark.bounding_box()
    assert box and 8 <= box["width"] <= 20 and 8 <= box["height"] <= 20, box
    assert not any(ord(c) > 0x2FFF for c in entry.inner_text()), entry.inner_text()
    entry.screenshot(path=str(ARTIFACTS / f"topbar-pinned-{width}.png"))
    assert not violations, violations
    context.close()


@pytest.mark.parametrize(("width", "height"), WIDTHS)
def test_the_bell_lists_what_is_new_with_a_badge(server, chromium, width, height):
    server.shell(
        "from routing.models import RoutedQuestion as Q\nQ.objects.filter(status='answered').update(seen_at=None)"
    )
    # The asker: one answer she has not read.
    context, page, violations = csp_signed_in(chromium, width, height, server.url, "erin", PASSWORD)
    bell = page.get_by_role("link", name="What's new")
    assert bell.is_visible()
    assert page.locator(".topbar-bell .badge-count").inner_text() == "1"
    assert page.locator("nav.topnav .badge-count:not([hidden])").count() == 0  # not on "My questions"
    bell.click()
    page.wait_for_url(server.url + "/routing/whats-new/")
    assert page.get_by_role("heading", name="What's new", level=1).is_visible()
    item = page.locator(".inbox-row", has_text="Can visitors get a parking permit")
    assert item.is_visible() and "Olivia Owens" in item.inner_text()
    assert page.get_by_role("link", name="Notification settings").is_visible()
    page.screenshot(path=str(ARTIFACTS / f"topbar-news-asker-{width}.png"), full_page=True)
    item.locator("a").click()  # the chat, at the answer: read from now on
    page.wait_for_selector(f"text={ANSWER}")
    page.goto(server.url + "/routing/whats-new/")
    assert page.locator(".topbar-bell .badge-count").is_hidden()
    assert page.get_by_text("Nothing new").is_visible()
    page.get_by_role("link", name="Notification settings").click()
    page.wait_for_url(server.url + "/routing/notifications/")
    assert not violations, violations
    context.close()
    # The owner: a question waiting for her.
    context, page, violations = csp_signed_in(chromium, width, height, server.url, "olivia", PASSWORD)
    assert page.locator(".topbar-bell .badge-count").inner_text() == "1"
    page.get_by_role("link", name="What's new").click()
    page.wait_for_url(server.url + "/routing/whats-new/")
    waiting = page.locator(".inbox-row", has_text="Where is the bike room")
    assert waiting.is_visible()
    page.screenshot(path=str(ARTIFACTS / f"topbar-news-owner-{width}.png"), full_page=True)
    waiting.locator("a").click()
    page.wait_for_url(server.url + "/routing/q/*/")
    assert not violations, violations
    context.close()
