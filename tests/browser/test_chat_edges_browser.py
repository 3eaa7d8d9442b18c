"""The question box says why it does not send (empty, too long: Send is disabled), and a question
the server refuses comes back to the landing page by a redirect, so a reload asks nothing again.
Edit shows on every question; where a question cannot be edited (not the latest, sent to a person),
pressing Edit says why; editing the chat's first question renames a chat named after it. A
citation written against its word ("per year[1].") is a citation, and its sentence is not flagged.
The Markdown export labels a regenerated answer's versions. At desktop and phone widths. Real
daphne, Debian's Chromium, the fake Ollama server."""

from __future__ import annotations

import pytest

from tests.browser.conftest import ARTIFACTS, new_page, seeded_server, sign_in, wait_until
from tests.browser.test_chat_browser import PASSWORD, SETUP

pytestmark = pytest.mark.browser

DOC = "3f1c2a4e-8b7d-4c6e-9a1b-2d3e4f5a6b7c"
ANSWER = (
    f"Full-time employees get 25 vacation days per year [SourceId: {DOC}:0]. "
    f"Requests go through the HR portal [SourceId: {DOC}:0]."
)
WIDTHS = [pytest.param((1280, 800, False), id="desktop"), pytest.param((390, 844, True), id="phone")]


@pytest.fixture(scope="module")
def server(tmp_path_factory, ollama_server):
    live = seeded_server(tmp_path_factory, ollama_server, name="composer-edit-browser", setup=SETUP % {"pw": PASSWORD})
    yield live
    live.stop()


def _page(chromium, base, size):
    width, height, mobile = size
    context, page = new_page(chromium, width=width, height=height, mobile=mobile)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    sign_in(page, base, "erin", PASSWORD)
    return context, page, errors


def _chats(server) -> int:
    return int(server.shell("from chat.models import ChatSession\nprint(ChatSession.objects.count())").split()[-1])


def _note(page) -> str:
    return page.inner_text("#composer-note").strip()


def _ask(page, question: str, *, answers: int) -> None:
    page.fill("#question", question)
    page.locator("#question").press("Enter")
    wait_until(
        page,
        f"document.querySelectorAll('article.msg-assistant:not(.status-streaming)').length === {answers}",
        timeout=30,
    )


@pytest.mark.parametrize("size", WIDTHS)
def test_the_box_says_why_it_does_not_send(server, chromium, fake_ollama, size):
    fake_ollama.reply(ANSWER)
    context, page, errors = _page(chromium, server.url, size)
    chats = _chats(server)
    # Empty: Send and Enter say what to do, and nothing is posted.
    page.click(".composer-send")
    assert _note(page) == "Type your question first, then send it."
    assert page.get_attribute("#composer-note", "class") == "composer-note composer-note-error"
    assert page.url == server.url + "/"
    page.fill("#question", "   ")
    page.locator("#question").press("Enter")
    assert _note(page) == "Type your question first, then send it."
    page.locator("#question").press_sequentially("How")
    assert _note(page) == ""  # typing takes the reason back
    # Too long: the counter turns red, Send is disabled and says why; Enter sends nothing.
    long_question = "Please explain the vacation policy in detail. " * 50  # 2,299 characters
    page.fill("#question", long_question)
    assert "over-limit" in page.get_attribute("#composer", "class")
    assert page.locator(".composer-send").is_disabled()
    assert _note(page) == "Too long to send: 2,299 characters, 299 over the limit of 2,000. Shorten your question."
    page.screenshot(path=str(ARTIFACTS / f"composer-too-long-{size[0]}.png"))
    page.locator("#question").press("Enter")
    page.wait_for_timeout(300)
    assert page.url == server.url + "/" and page.input_value("#question") == long_question
    # Shortened under the limit: Send is back, the reason goes.
    page.fill("#question", long_question[:1990])
    assert page.locator(".composer-send").is_enabled() and _note(page) == ""
    assert _chats(server) == chats
    # In a chat the same: empty and too long say why.
    page.fill("#question", "How many vacation days do I get?")
    page.locator("#question").press("Enter")
    page.wait_for_selector("article.msg-assistant.status-complete", timeout=30_000)
    page.click(".composer-send")
    assert _note(page) == "Type your question first, then send it."
    page.fill("#question", long_question)
    assert page.locator(".composer-send").is_disabled() and _note(page).startswith("Too long to send")
    page.locator("#question").press("Enter")
    page.wait_for_timeout(300)
    assert page.locator("article.msg-user").count() == 1 and page.input_value("#question") == long_question
    page.screenshot(path=str(ARTIFACTS / f"composer-too-long-chat-{size[0]}.png"))
    assert errors == []
    context.close()


@pytest.mark.parametrize("size", WIDTHS)
def test_a_refused_first_question_is_not_asked_again_by_a_reload(server, chromium, fake_ollama, size):
    fake_ollama.reply(ANSWER)
    context, page, errors = _page(chromium, server.url, size)
    chats = _chats(server)
    page.fill("#question", "Hi")  # under the server's three characters
    page.locator("#question").press("Enter")
    page.wait_for_selector("#composer-note.composer-note-error")
    # Back on the landing page by a redirect, with the text and the reason.
    assert page.url == server.url + "/"
    assert "too short" in _note(page) and page.input_value("#question") == "Hi"
    page.screenshot(path=str(ARTIFACTS / f"composer-refused-prg-{size[0]}.png"))
    # A reload asks for the landing page again, not the form's post: nothing is refused again.
    page.reload()
    assert page.url == server.url + "/" and _note(page) == ""
    assert _chats(server) == chats
    assert errors == []
    context.close()


@pytest.mark.parametrize("size", WIDTHS)
def test_edit_says_why_it_is_unavailable_and_renames_the_chat(server, chromium, fake_ollama, size):
    fake_ollama.reply(ANSWER)  # well supported: not sent to a person
    context, page, errors = _page(chromium, server.url, size)
    _ask(page, "How many vacation days do I get?", answers=1)
    session = page.get_attribute("#chat", "data-session")
    assert page.inner_text("#chat-title") == "How many vacation days do I get?"
    # Editing the first question renames the chat named after it: the header and the chat list.
    first = page.locator("article.msg-user").first
    first.locator(".msg-edit").click()
    page.fill("#question", "How many vacation days do part-time employees get?")
    page.locator("#question").press("Enter")
    page.wait_for_selector("article.msg-assistant.status-complete", timeout=30_000)
    renamed = "How many vacation days do part-time employees get?"
    wait_until(page, f"document.getElementById('chat-title').textContent === {renamed!r}")
    assert page.locator(f"#session-title-{session}").text_content().strip() == renamed
    page.reload()
    assert page.inner_text("#chat-title") == renamed
    # A second question: the first one's Edit stays, quiet, and says why when pressed.
    _ask(page, "Where do I request them?", answers=2)
    first, second = page.locator("article.msg-user").first, page.locator("article.msg-user").last
    assert (
        first.locator(".msg-edit").is_visible() and first.locator(".msg-edit").get_attribute("aria-disabled") == "true"
    )
    assert second.locator(".msg-edit").get_attribute("aria-disabled") == "false"
    page.fill("#question", "half-typed")
    first.locator(".msg-edit").click(force=True)  # aria-disabled: Playwright would wait for it to enable
    assert _note(page).startswith("Only your latest question can be edited: the answers after this one build on it.")
    assert "editing" not in page.get_attribute("#composer", "class") and page.input_value("#question") == "half-typed"
    page.screenshot(path=str(ARTIFACTS / f"chat-edit-unavailable-{size[0]}.png"))
    # The latest question, sent to a person: its Edit says so.
    fake_ollama.reply("I am not sure.")  # nothing cited: low confidence, sent to the tag's owner
    page.fill("#question", "")
    _ask(page, "Can I take them in December?", answers=3)
    page.wait_for_selector("article.msg-assistant[data-routed]", timeout=20_000)
    last = page.locator("article.msg-user").last
    assert last.locator(".msg-edit").get_attribute("aria-disabled") == "true"
    last.locator(".msg-edit").click(force=True)
    assert _note(page) == "This question went to a person, so it stays as asked. Ask a new question instead."
    page.reload()
    assert page.locator("article.msg-user .msg-edit:visible").count() == 3
    assert page.locator("article.msg-user .msg-edit[aria-disabled='false']").count() == 0
    assert errors == []
    context.close()


@pytest.mark.parametrize("size", WIDTHS)
def test_a_citation_against_its_word_is_a_citation_and_its_sentence_stands(server, chromium, fake_ollama, size):
    fake_ollama.reply(ANSWER)
    fake_ollama.habits(citations="numbered-glued")  # "… per year[1]. … portal[1]."
    context, page, errors = _page(chromium, server.url, size)
    _ask(page, "How many vacation days do I get?", answers=1)
    answer = page.locator("article.msg-assistant").last
    body = answer.locator(".msg-body")
    assert "[1]" not in body.inner_text() and body.locator(".cite-marker").count() == 2
    assert body.locator(".claim-flag, .claim-unsupported").count() == 0
    assert "Vacation Policy 2026.pdf" in answer.locator(".sources").inner_text()
    assert "attributed by ragchat" not in answer.inner_text()
    page.screenshot(path=str(ARTIFACTS / f"chat-glued-citation-{size[0]}.png"))
    assert errors == []
    context.close()


@pytest.mark.parametrize("size", WIDTHS)
def test_the_markdown_export_labels_the_versions(server, chromium, fake_ollama, size):
    fake_ollama.reply(ANSWER)
    context, page, errors = _page(chromium, server.url, size)
    _ask(page, "How many vacation days do I get?", answers=1)
    fake_ollama.reply("Twenty-five days a year [SourceId: " + DOC + ":0].")
    page.locator("article.msg-assistant .regen button").click()
    page.wait_for_selector("article.msg-assistant.status-complete:has-text('Twenty-five')", timeout=30_000)
    page.locator(".chat-menu summary").click()
    with page.expect_download() as download:
        page.locator(".chat-menu a:has-text('Markdown')").click()
    with open(download.value.path(), encoding="utf-8") as saved:
        text = saved.read()
    assert "## Assistant · version 1 of 2 · " in text and "## Assistant · version 2 of 2 · " in text
    assert text.index("Full-time employees get 25") < text.index("version 2 of 2") < text.index("Twenty-five")
    assert errors == []
    context.close()
