"""What people reach for in a chat, at desktop and phone widths and by keyboard (issue 14): the
window-filling layout and the top bar, the chat list as a drawer on phones, search across chats,
citation cards that close (button, Escape, tap or click elsewhere, another marker) with one Tab stop
per citation, the chat menu on Escape, the skip link, the dark theme and its switch. Real daphne,
Debian's Chromium, the fake Ollama server."""

from __future__ import annotations

import pytest

from tests.browser.conftest import ARTIFACTS, seeded_server, signed_in, wait_until
from tests.browser.test_chat_browser import PASSWORD, SETUP

pytestmark = pytest.mark.browser

DOC = "3f1c2a4e-8b7d-4c6e-9a1b-2d3e4f5a6b7c"
ANSWER = (
    f"Full-time employees get 25 vacation days per year [SourceId: {DOC}:0]. "
    f"Up to five unused days carry over until March 31 [SourceId: {DOC}:1]. "
    f"Requests go through the HR portal [SourceId: {DOC}:0]."
)
WIDTHS = [pytest.param((1280, 800, False), id="desktop"), pytest.param((390, 844, True), id="phone")]


@pytest.fixture(scope="module")
def server(tmp_path_factory, ollama_server):
    live = seeded_server(tmp_path_factory, ollama_server, name="chat-ux-browser", setup=SETUP % {"pw": PASSWORD})
    yield live
    live.stop()


def _page(chromium, base, size, **extra):
    width, height, mobile = size
    return signed_in(chromium, base, "erin", PASSWORD, width=width, height=height, mobile=mobile, **extra)


def _ask(page, question: str) -> None:
    page.fill("#question", question)
    page.keyboard.press("Enter")
    page.wait_for_selector("article.msg-assistant.status-complete", timeout=20_000)


def _no_page_scroll(page) -> bool:
    return page.evaluate(
        "document.documentElement.scrollHeight <= window.innerHeight + 1"
        " && document.documentElement.scrollWidth <= window.innerWidth + 1"
    )


@pytest.mark.parametrize("size", WIDTHS)
def test_layout_drawer_and_search(server, chromium, fake_ollama, size):
    fake_ollama.reply(ANSWER)
    context, page = _page(chromium, server.url, size)
    _ask(page, "How many vacation days do I get per year?")
    # The chat page fills the window exactly: no page scroll either way, the composer in view.
    assert _no_page_scroll(page)
    box = page.locator("#composer").bounding_box()
    assert box["y"] + box["height"] <= size[1] + 1
    # Every top-bar item is on screen (the nav wraps on phones instead of scrolling sideways).
    for link in page.locator("nav.topnav a").all():
        b = link.bounding_box()
        assert b and b["x"] >= 0 and b["x"] + b["width"] <= size[0] + 1, link.inner_text()

    if size[2]:
        # Phones: the chat list is a drawer, opened by the Chats button and closed by Escape.
        assert page.locator("#chat-sidebar").is_hidden()
        toggle = page.locator(".chat-head .chat-drawer-toggle")
        toggle.click()
        assert page.locator("#chat-sidebar").is_visible()
        assert toggle.get_attribute("aria-expanded") == "true"
        assert page.evaluate("document.getElementById('chat-sidebar').contains(document.activeElement)")
        page.screenshot(path=str(ARTIFACTS / "chat-ux-drawer-phone.png"))
        page.keyboard.press("Escape")
        assert page.locator("#chat-sidebar").is_hidden()
        assert page.evaluate("document.activeElement.classList.contains('chat-drawer-toggle')")
        toggle.click()
        page.locator(".drawer-backdrop").click(position={"x": 370, "y": 400})
        assert page.locator("#chat-sidebar").is_hidden()
        toggle.click()
    else:
        assert page.locator(".chat-head .chat-drawer-toggle").is_hidden()
    # Search: typing filters the list to chats that mention the words, with an excerpt.
    page.fill("#chat-search-q", "carry over")
    page.wait_for_selector("#session-list .session-match", timeout=5_000)
    assert "carry over" in page.inner_text("#session-list .session-match").lower()
    page.fill("#chat-search-q", "zanzibar")
    page.wait_for_selector("#session-list:has-text('No chat mentions')", timeout=5_000)
    page.fill("#chat-search-q", "")
    page.wait_for_selector("#session-list .session-link", timeout=5_000)
    context.close()


@pytest.mark.parametrize("size", WIDTHS)
def test_citation_cards_close_and_take_one_tab_stop(server, chromium, fake_ollama, size):
    fake_ollama.reply(ANSWER)
    context, page = _page(chromium, server.url, size)
    _ask(page, "How many vacation days do I get per year?")
    markers = page.locator("article.status-complete .cite-marker")
    cards = page.locator("article.status-complete .cite-card")
    assert markers.count() == 3

    # Tap or click a marker: its card opens, with a close button.
    markers.nth(0).tap() if size[2] else markers.nth(0).click()
    assert cards.nth(0).is_visible()
    page.screenshot(path=str(ARTIFACTS / f"chat-ux-card-{size[0]}.png"))
    page.locator("article.status-complete .cite-close").first.click()
    assert cards.nth(0).is_hidden()

    # A tap or click elsewhere closes an open card.
    markers.nth(0).tap() if size[2] else markers.nth(0).click()
    assert cards.nth(0).is_visible()
    page.locator("#chat-title").tap() if size[2] else page.locator("#chat-title").click()
    assert cards.nth(0).is_hidden()

    if not size[2]:
        # Desktop: another marker is never hidden under an open card, and takes over.
        markers.nth(0).click()
        markers.nth(1).hover()
        assert cards.nth(1).is_visible() and cards.nth(0).is_hidden()
        page.mouse.move(5, 5)

    # Keyboard: one Tab stop per citation; Escape closes the card and keeps focus on the marker.
    page.locator("#question").focus()
    markers.nth(0).focus()
    assert cards.nth(0).is_visible()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.classList.contains('cite-marker')")
    assert page.evaluate("document.activeElement.textContent") == "2"
    page.keyboard.press("Escape")
    assert page.evaluate("document.activeElement.textContent") == "2"
    assert cards.nth(1).is_hidden()
    # Enter pins the card open; its controls join the tab order until it closes.
    page.keyboard.press("Enter")
    assert cards.nth(1).is_visible()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.classList.contains('cite-close')")
    page.keyboard.press("Enter")
    assert cards.nth(1).is_hidden()
    assert page.evaluate("document.activeElement.textContent") == "2"
    context.close()


def test_keyboard_skip_link_menu_and_live_region(server, chromium, fake_ollama):
    fake_ollama.reply(ANSWER)
    context, page = _page(chromium, server.url, (1280, 800, False))
    _ask(page, "How many vacation days do I get per year?")
    assert page.get_attribute("#messages", "role") == "log"
    # The first Tab reaches the skip link, which lands in the question box.
    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "question"
    # The chat menu opens from the keyboard and closes on Escape, focus back on its button.
    page.locator(".chat-menu summary").focus()
    page.keyboard.press("Enter")
    assert page.locator(".chat-menu-panel").is_visible()
    page.locator("#rename-title").focus()
    page.keyboard.press("Escape")
    assert page.locator(".chat-menu-panel").is_hidden()
    assert page.evaluate("document.activeElement.tagName") == "SUMMARY"
    # The rename box shows the chat's title (the automatic one), not "New chat".
    assert page.input_value("#rename-title") == "How many vacation days do I get per year?"
    assert page.locator("link[rel=icon]").count() == 1
    assert page.request.get(server.url + page.get_attribute("link[rel=icon]", "href")).ok
    context.close()


@pytest.mark.parametrize("size", WIDTHS)
def test_dark_theme_follows_the_system_and_the_switch(server, chromium, fake_ollama, size):
    fake_ollama.reply(ANSWER)
    context, page = _page(chromium, server.url, size, color_scheme="dark")
    background = "getComputedStyle(document.body).backgroundColor"
    dark = page.evaluate(background)
    assert dark == "rgb(15, 20, 27)"
    _ask(page, "How many vacation days do I get per year?")
    page.screenshot(path=str(ARTIFACTS / f"chat-dark-{size[0]}.png"))

    def switch(theme: str) -> None:
        if size[2]:  # on phones the switch is in the top bar's Menu
            page.locator(".topbar-menu > summary").click()
        page.select_option("#theme-switch", theme)

    # The switch pins light, for this page and the next ones.
    switch("light")
    assert page.evaluate(background) == "rgb(246, 247, 249)"
    page.reload()
    assert page.evaluate(background) == "rgb(246, 247, 249)"
    assert page.input_value("#theme-switch") == "light"
    switch("system")
    assert page.evaluate(background) == dark
    context.close()


@pytest.mark.parametrize("size", WIDTHS)
def test_copy_answer_and_code_with_highlighting_and_export(server, chromium, fake_ollama, size):
    fake_ollama.reply(
        f"Run this to see your days [SourceId: {DOC}:0]:\n\n```python\ndef days(year):\n    return 25\n```\n\nDone."
    )
    context, page = _page(chromium, server.url, size)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    _ask(page, "How many vacation days do I get per year?")
    answer = page.locator("article.msg-assistant.status-complete")
    # The code block is highlighted (vendored highlight.js) and has its own copy button.
    answer.locator("code.hljs .hljs-keyword").first.wait_for()
    answer.locator(".code-copy").click()
    assert page.evaluate("navigator.clipboard.readText()") == "def days(year):\n    return 25\n"
    # Copy the answer: Markdown, citations as numbers, the sources under it.
    answer.locator(".msg-copy").click()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith("Run this to see your days [1]:")
    assert "```python" in copied and copied.endswith("- [1] Vacation Policy 2026.pdf (page 3, Annual leave)")
    assert answer.locator(".msg-copy").inner_text() == "Copied"
    page.screenshot(path=str(ARTIFACTS / f"chat-code-{size[0]}.png"))
    # Export from the chat menu.
    page.locator(".chat-menu summary").click()
    with page.expect_download() as download:
        page.locator(".chat-menu a:has-text('Markdown')").click()
    assert download.value.suggested_filename == "how-many-vacation-days-do-i-get-per-year.md"
    with page.expect_download() as download:
        page.locator(".chat-menu a:has-text('PDF')").click()
    path = download.value.path()
    assert open(path, "rb").read(4) == b"%PDF"
    context.close()


@pytest.mark.parametrize("size", WIDTHS)
def test_regenerate_with_versions_and_pin_archive(server, chromium, fake_ollama, size):
    fake_ollama.reply(f"First answer [SourceId: {DOC}:0].")
    context, page = _page(chromium, server.url, size)
    _ask(page, "How many vacation days do I get per year?")
    fake_ollama.reply(f"Second answer [SourceId: {DOC}:1].")
    page.locator("article.msg-assistant .regen button").click()
    page.wait_for_selector("article.msg-assistant.status-complete:has-text('Second answer')", timeout=20_000)
    visible = page.locator("article.msg-assistant:visible")
    assert visible.count() == 1 and "2 / 2" in visible.inner_text()
    # The earlier version is one click (or key press) away.
    visible.locator(".ver-step[data-step='-1']").click()
    visible = page.locator("article.msg-assistant:visible")
    assert "First answer" in visible.inner_text() and "1 / 2" in visible.inner_text()
    assert page.locator(".regen:visible").count() == 0  # only the latest version regenerates
    page.keyboard.press("Enter")  # focus moved to the "next" button of the shown version
    assert "Second answer" in page.locator("article.msg-assistant:visible").inner_text()
    # After a reload the latest version shows, the older one stays reachable.
    page.reload()
    visible = page.locator("article.msg-assistant:visible")
    assert visible.count() == 1 and "Second answer" in visible.inner_text() and "2 / 2" in visible.inner_text()
    page.screenshot(path=str(ARTIFACTS / f"chat-versions-{size[0]}.png"))

    # Pin, then archive, from the chat menu.
    title = "How many vacation days do I get per year?"
    page.locator(".chat-menu summary").click()
    page.locator(".chat-menu button:has-text('Pin')").click()
    page.wait_for_load_state()
    page.locator(".chat-menu summary").click()
    assert page.locator(".chat-menu button:has-text('Unpin')").is_visible()
    listed = page.locator(f"#session-list .session-link:has-text('{title}')").count()
    page.locator(".chat-menu button:has-text('Archive')").click()
    page.wait_for_url("**/chat/archived/")
    assert title in page.inner_text(".archived-list")
    assert page.locator(f"#session-list .session-link:has-text('{title}')").count() == listed - 1
    page.locator(".archived-row button:has-text('Unarchive')").first.click()
    page.wait_for_selector("#chat-title")
    context.close()


@pytest.mark.parametrize("size", WIDTHS)
def test_edit_the_last_question_and_ask_again(server, chromium, fake_ollama, size):
    fake_ollama.reply(ANSWER)  # well supported: not sent to a person, so the question may change
    context, page = _page(chromium, server.url, size)
    _ask(page, "How many vacation days do I get?")
    edit = page.locator("article.msg-user .msg-edit")
    assert edit.count() == 1 and edit.is_visible()
    # Edit puts the question in the composer; Escape cancels and gives back what was typed.
    page.fill("#question", "half-typed")
    edit.click()
    assert page.input_value("#question") == "How many vacation days do I get?"
    assert "Editing your last question" in page.inner_text("#composer-note")
    page.keyboard.press("Escape")
    assert page.input_value("#question") == "half-typed" and page.inner_text("#composer-note").strip() == ""
    # By keyboard: Tab to the Edit button, Enter, change the text, Enter sends.
    page.fill("#question", "")
    edit.focus()
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "question"
    page.fill("#question", "How many vacation days do part-time employees get?")
    fake_ollama.reply("Part-time employees get a pro-rated share. " + ANSWER)
    page.keyboard.press("Enter")
    page.wait_for_selector("article.msg-assistant.status-complete:has-text('pro-rated')", timeout=20_000)
    # One question with its new text, one answer: the old answer left the page and the store.
    assert page.locator("article.msg-user").count() == 1
    assert "part-time employees" in page.inner_text("article.msg-user")
    assert page.locator("article.msg-assistant").count() == 1
    assert page.input_value("#question") == ""
    page.reload()
    assert page.locator("article.msg-assistant").count() == 1 and "pro-rated" in page.inner_text("#messages")
    # Only the latest question offers Edit.
    fake_ollama.reply(ANSWER)
    _ask_more = page.locator("article.msg-assistant.status-complete")
    page.fill("#question", "Where do I request them?")
    page.keyboard.press("Enter")
    wait_until(page, "document.querySelectorAll('article.msg-assistant.status-complete').length === 2")
    assert _ask_more.count() == 2
    assert page.locator("article.msg-user .msg-edit[aria-disabled='false']").count() == 1
    assert page.locator("article.msg-user").last.locator(".msg-edit").get_attribute("aria-disabled") == "false"
    page.screenshot(path=str(ARTIFACTS / f"chat-edit-{size[0]}.png"))
    context.close()


def test_a_question_sent_to_a_person_offers_no_edit(server, chromium, fake_ollama):
    fake_ollama.reply("I am not sure.")  # nothing cited: low confidence, sent to the tag's owner
    context, page = _page(chromium, server.url, (1280, 800, False))
    _ask(page, "How many vacation days do I get?")
    page.wait_for_selector("article.msg-assistant[data-routed]", timeout=20_000)
    assert page.locator("article.msg-user .msg-edit[aria-disabled='false']").count() == 0
    page.reload()
    assert page.locator("article.msg-user .msg-edit[aria-disabled='false']").count() == 0
    context.close()


def test_retry_replaces_the_failed_answer(server, chromium, fake_ollama):
    fake_ollama.fail_with(500, times=None, paths=("/api/chat",))
    context, page = _page(chromium, server.url, (1280, 800, False))
    page.fill("#question", "How many vacation days do I get per year?")
    page.keyboard.press("Enter")
    page.wait_for_selector("article.msg-assistant.status-failed", timeout=30_000)
    fake_ollama.reset()
    fake_ollama.reply(ANSWER)
    # A double click retries once (the second finds nothing left to retry) and leaves no note.
    page.evaluate(
        "() => { const b = document.querySelector('article.status-failed form button'); b.click(); b.click(); }"
    )
    page.wait_for_selector("article.msg-assistant.status-complete", timeout=30_000)
    assert page.inner_text("#composer-note").strip() == ""
    # One question, one answer: the failed one was replaced, not kept next to the new one.
    assert page.locator("article.msg-user").count() == 1
    assert page.locator("article.msg-assistant").count() == 1
    page.reload()
    assert page.locator("article.msg-assistant").count() == 1 and page.locator(".status-failed").count() == 0
    context.close()
