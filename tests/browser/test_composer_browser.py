"""The composer never loses what a person typed (issue 14): a refused question stays in the box with
the reason; a question typed while an answer streams waits and goes when it ends; one sent while
the socket is down goes on reconnect; the landing page starts a chat with its first question. At
desktop and phone widths, by keyboard. Real daphne, Debian's Chromium, the fake Ollama server."""

from __future__ import annotations

import pytest

from tests.browser.conftest import ARTIFACTS, seeded_server, signed_in, wait_until
from tests.browser.test_chat_browser import PASSWORD, SETUP

pytestmark = pytest.mark.browser

WIDTHS = [pytest.param((1280, 800, False), id="desktop"), pytest.param((390, 844, True), id="phone")]


@pytest.fixture(scope="module")
def server(tmp_path_factory, ollama_server):
    live = seeded_server(tmp_path_factory, ollama_server, name="composer-browser", setup=SETUP % {"pw": PASSWORD})
    yield live
    live.stop()


def _page(chromium, base, size):
    width, height, mobile = size
    return signed_in(chromium, base, "erin", PASSWORD, width=width, height=height, mobile=mobile)


def _start_chat(page, question: str) -> None:
    page.locator("#question").focus()
    page.keyboard.type(question)
    page.keyboard.press("Enter")
    page.wait_for_selector("#conn[data-state=open]", timeout=10_000)


@pytest.mark.parametrize("size", WIDTHS)
def test_a_refused_question_keeps_its_text_and_says_why(server, chromium, fake_ollama, size):
    fake_ollama.reply("Twenty-five days [SourceId: 3f1c2a4e-8b7d-4c6e-9a1b-2d3e4f5a6b7c:0].")
    context, page = _page(chromium, server.url, size)
    # The landing page: a too-long first question comes back with its text and the reason.
    long_question = "Please explain the vacation policy in detail. " * 50  # 2,350 characters
    page.fill("#question", long_question)
    page.dispatch_event("#question", "input")
    assert "over-limit" in page.get_attribute("#composer", "class")
    assert page.inner_text("#question-count") == f"{len(long_question.strip()):,}"
    page.locator("#question").press("Enter")
    page.wait_for_selector(".composer-note-error")
    assert "Too long to send" in page.inner_text("#composer-note")
    assert page.input_value("#question").strip() == long_question.strip()

    # In a chat: the server refuses what the box lets through (a question under three characters);
    # the box keeps every character.
    page.fill("#question", "")
    _start_chat(page, "How many vacation days do I get?")
    page.wait_for_selector("article.msg-assistant.status-complete", timeout=20_000)
    assert page.input_value("#question") == ""
    page.fill("#question", "Hm")
    page.locator("#question").press("Enter")
    page.wait_for_selector("#composer-note.composer-note-error", timeout=10_000)
    assert "too short" in page.inner_text("#composer-note")
    assert page.input_value("#question") == "Hm"
    assert page.locator("article.msg-user").count() == 1
    page.screenshot(path=str(ARTIFACTS / f"composer-refused-{size[0]}.png"))
    context.close()


@pytest.mark.parametrize("size", WIDTHS)
def test_a_question_typed_during_an_answer_waits_and_is_sent_after_it(server, chromium, fake_ollama, size):
    fake_ollama.reply("Vacation days are twenty-five per year for everyone who works here full time. " * 3)
    fake_ollama.token_delay(0.05)
    context, page = _page(chromium, server.url, size)
    _start_chat(page, "How many vacation days do I get?")
    page.wait_for_selector("article.status-streaming .msg-body p", timeout=10_000)
    page.locator("#question").focus()
    page.keyboard.type("And do unused days carry over?")
    page.keyboard.press("Enter")
    note = page.locator("#composer-note")
    assert "will be sent when the current answer is finished" in note.inner_text()
    assert page.input_value("#question") == "And do unused days carry over?"
    # The first answer ends; the waiting question goes by itself and the box empties.
    wait_until(page, "document.querySelectorAll('article.msg-user').length === 2", timeout=30)
    wait_until(page, "document.querySelectorAll('article.msg-assistant.status-complete').length === 2", timeout=30)
    assert page.input_value("#question") == ""
    assert note.inner_text().strip() == ""
    assert page.locator("article.msg-user .msg-body").last.inner_text().strip() == "And do unused days carry over?"
    context.close()


def test_a_waiting_question_can_be_called_off(server, chromium, fake_ollama):
    fake_ollama.reply("Vacation days are twenty-five per year for everyone who works here full time. " * 3)
    fake_ollama.token_delay(0.05)
    context, page = _page(chromium, server.url, (1280, 800, False))
    _start_chat(page, "How many vacation days do I get?")
    page.wait_for_selector("article.status-streaming", timeout=10_000)
    page.fill("#question", "Second thoughts")
    page.locator("#question").press("Enter")
    page.click('#composer-note button:has-text("Don\'t send")')
    page.wait_for_selector("article.msg-assistant.status-complete", timeout=30_000)
    page.wait_for_timeout(500)
    assert page.locator("article.msg-user").count() == 1
    assert page.input_value("#question") == "Second thoughts"
    context.close()


@pytest.mark.parametrize("size", WIDTHS)
def test_send_turns_into_stop_while_an_answer_streams(server, chromium, fake_ollama, size):
    fake_ollama.reply("Vacation days are twenty-five per year for everyone who works here full time. " * 4)
    fake_ollama.token_delay(0.05)
    context, page = _page(chromium, server.url, size)
    _start_chat(page, "How many vacation days do I get?")
    page.wait_for_selector("article.status-streaming .msg-body p:has-text('twenty-five')", timeout=10_000)
    assert page.locator(".composer-send").is_hidden()
    stop = page.locator(".composer-stop")
    assert stop.is_visible()
    stop.click()
    page.wait_for_selector("article.msg-assistant.status-interrupted", timeout=10_000)
    article = page.locator("article.msg-assistant").last
    assert "Stopped" in article.inner_text() and "twenty-five" in article.inner_text()
    assert page.locator(".composer-send").is_visible() and stop.is_hidden()
    # Regenerate replaces the stopped answer with a full one.
    fake_ollama.token_delay(0)
    article.locator("button:has-text('Regenerate')").click()
    page.wait_for_selector("article.msg-assistant.status-complete", timeout=20_000)
    assert page.locator("article.msg-assistant").count() == 1
    context.close()


def test_a_question_sent_while_disconnected_is_sent_on_reconnect(server, chromium, fake_ollama):
    fake_ollama.reply("Twenty-five days [SourceId: 3f1c2a4e-8b7d-4c6e-9a1b-2d3e4f5a6b7c:0].")
    context, page = _page(chromium, server.url, (1280, 800, False))
    _start_chat(page, "How many vacation days do I get?")
    page.wait_for_selector("article.msg-assistant.status-complete", timeout=20_000)
    # The server goes away; the question typed meanwhile waits in the box and is sent on reconnect.
    chromium.allow("htmx:wsError", why="the server is stopped: the page's sockets fail until it is back")
    server.stop()
    page.wait_for_selector("#conn[data-state=closed]", timeout=10_000)
    page.fill("#question", "Do unused days carry over?")
    page.locator("#question").press("Enter")
    page.wait_for_timeout(300)
    assert page.input_value("#question") == "Do unused days carry over?"
    server.start()  # the same port: the page reconnects by itself
    wait_until(page, "document.querySelectorAll('article.msg-assistant.status-complete').length === 2", timeout=40)
    assert page.input_value("#question") == ""
    assert page.locator("article.msg-user").count() == 2
    context.close()
