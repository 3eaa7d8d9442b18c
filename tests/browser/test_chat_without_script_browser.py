"""The chat pages in Chromium with script off and on, on a server with DEBUG off as in production:
the skip link leads to something that is there (the question box needs script: without it, the
content), and deleting a chat asks first either way (without script on a page of its own, with it in
a dialog). Screenshots at desktop and phone widths go to test-artifacts/."""

from __future__ import annotations

import json

import pytest

from tests.browser.conftest import (
    ARTIFACTS,
    WIDTHS,
    assert_no_sideways_scroll,
    csp_signed_in,
    seeded_server,
)
from tests.browser.test_csp_browser import SETUP

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server(tmp_path_factory, ollama_server):
    server = seeded_server(
        tmp_path_factory, ollama_server, name="chat-without-script", setup=SETUP, extra_env={"DJANGO_DEBUG": "false"}
    )
    yield server, json.loads(server.setup_output.strip().splitlines()[-1])
    server.stop()


def _new_chat(live, title: str) -> str:
    """A chat of Emma's with a question and its answer (no turn to start), made while the server runs
    (SQLite WAL allows it)."""
    out = live.shell(
        "from chat.models import ChatSession, Message\nfrom ragchat.models import User\n"
        f"s = ChatSession.objects.create(owner=User.objects.get(username='emma'), title={title!r})\n"
        "q = Message.objects.create(session=s, role='user', content='Who approves travel?')\n"
        "Message.objects.create(session=s, role='assistant', reply_to=q, content='Your manager does.')\n"
        "print(s.pk)"
    )
    return out.strip().splitlines()[-1]


def _chat_exists(live, session_id: str) -> bool:
    out = live.shell(
        f"from chat.models import ChatSession\nprint(ChatSession.objects.filter(pk={session_id!r}).exists())"
    )
    return out.strip().splitlines()[-1] == "True"


def _skip(page, text: str, screenshot: str = "") -> str:
    """The stop before the top bar's first link is the skip link saying `text` (what comes first when
    one tabs from the top of the page); following it lands on its target, which is shown. Returns the
    target's selector."""
    page.focus("header.topbar .brand")
    page.keyboard.press("Shift+Tab")
    link = page.locator(":focus")
    assert "skip-link" in link.get_attribute("class") and link.is_visible()  # shown while focused
    target, said = link.get_attribute("href"), link.inner_text()
    if screenshot:
        page.screenshot(path=str(ARTIFACTS / screenshot))
    page.keyboard.press("Enter")
    assert page.evaluate("location.hash") == target
    assert page.locator(target).is_visible(), f"“{said}” leads to {target}, which is not shown"
    assert said == text
    return target


@pytest.mark.parametrize("width,height", WIDTHS)
def test_the_skip_link_leads_to_what_is_there(server, chromium, width, height):
    live, ids = server
    label = "desktop" if width > 600 else "phone"
    for path in ("/", f"/chat/{ids['s1']}/"):
        # Without script the question box is hidden: the skip link goes to the content, and the next
        # Tab starts there, past the top bar.
        context, page, violations = csp_signed_in(
            chromium, width, height, live.url, "emma", "pw-emma-12345", script=False
        )
        page.goto(live.url + path)
        assert page.locator("#question").is_hidden()
        assert _skip(page, "Skip to content") == "#main"
        page.keyboard.press("Tab")
        assert page.evaluate("document.querySelector('main').contains(document.activeElement)")
        page.goto(live.url + path)
        page.keyboard.press("Tab")  # the first stop of a fresh page
        assert page.locator(":focus").inner_text() == "Skip to content"
        name = "home" if path == "/" else "session"
        page.screenshot(path=str(ARTIFACTS / f"chat-skip-link-no-script-{name}-{label}.png"))
        context.close()

        # With script: the question box, focused.
        context, page, violations = csp_signed_in(
            chromium, width, height, live.url, "emma", "pw-emma-12345", script=True
        )
        page.goto(live.url + path)
        name = "home" if path == "/" else "session"
        _skip(page, "Skip to the question box", f"chat-skip-link-{name}-{label}.png")
        assert page.evaluate("document.activeElement.id") == "question"
        assert not violations, violations
        context.close()


@pytest.mark.parametrize("width,height", WIDTHS)
def test_deleting_a_chat_without_script_asks_on_a_page(server, chromium, width, height):
    live, _ = server
    label = "desktop" if width > 600 else "phone"
    session_id = _new_chat(live, f"Travel approvals {label}")
    chat_url = f"{live.url}/chat/{session_id}/"
    context, page, violations = csp_signed_in(chromium, width, height, live.url, "emma", "pw-emma-12345", script=False)
    page.goto(chat_url)
    page.click(".chat-menu summary")  # <details>: opens without script
    page.screenshot(path=str(ARTIFACTS / f"chat-menu-no-script-{label}.png"))
    with page.expect_navigation():
        page.click(".chat-menu .btn-danger:has-text('Delete chat')")
    assert page.url == f"{chat_url}delete/"
    assert page.locator("h1").inner_text() == "Delete this chat?"
    assert f"“Travel approvals {label}” and all its messages will be deleted." in page.inner_text("main")
    assert page.locator("header.topbar .topbar-bell").is_visible()  # the product's layout (its nav folds on phones)
    assert page.title() == "Delete this chat? · ragchat"
    assert_no_sideways_scroll(page)
    page.screenshot(path=str(ARTIFACTS / f"chat-delete-ask-{label}.png"), full_page=True)
    assert _chat_exists(live, session_id)  # asking changed nothing

    with page.expect_navigation():
        page.click("main a:has-text('Cancel')")
    assert page.url == chat_url and _chat_exists(live, session_id)

    page.goto(f"{chat_url}delete/")
    with page.expect_navigation():
        page.click("main button:has-text('Delete')")
    assert page.url == live.url + "/"
    assert not _chat_exists(live, session_id)
    assert f"Travel approvals {label}" not in page.inner_text("body")
    assert not violations, violations
    context.close()


def test_deleting_a_chat_with_script_asks_in_a_dialog(server, chromium):
    live, _ = server
    session_id = _new_chat(live, "Parking permits")
    chat_url = f"{live.url}/chat/{session_id}/"
    context, page, violations = csp_signed_in(chromium, 1280, 800, live.url, "emma", "pw-emma-12345", script=True)
    page.goto(chat_url)
    asked: list[str] = []

    def answer(accept: bool):
        def handle(dialog):
            asked.append(dialog.message)
            dialog.accept() if accept else dialog.dismiss()

        return handle

    page.once("dialog", answer(False))
    page.click(".chat-menu summary")
    page.screenshot(path=str(ARTIFACTS / "chat-menu-desktop.png"))
    page.click(".chat-menu .btn-danger:has-text('Delete chat')")
    page.wait_for_timeout(500)  # a request, had one been sent, would be back by now
    assert asked == ["Delete this chat and all its messages?"]
    assert page.url == chat_url and _chat_exists(live, session_id)

    page.once("dialog", answer(True))
    with page.expect_navigation():
        page.click(".chat-menu .btn-danger:has-text('Delete chat')")
    page.wait_for_url(live.url + "/")
    assert len(asked) == 2 and not _chat_exists(live, session_id)
    assert not violations, violations
    context.close()
