"""The chat in a real browser: Debian's Chromium through Playwright, against daphne serving the app
(subprocess, its own SQLite file and embedded Qdrant), the fake Ollama server as the model.

Screenshots (desktop and phone widths) go to test-artifacts/.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.conftest import seeded_server, signed_in
from tests.browser.test_axe_browser import AXE, axe_problems

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
PASSWORD = "browser-pass-123"
# How long an answer may take to start or end here: CI runs both database passes and their browsers
# side by side on two cores (as the other browser tests wait for answers).
ANSWER_WAIT_MS = 30_000

SETUP = r"""
import asyncio
from ragchat import runtime
from ragchat.models import User
from ragchat.services.types import ChunkRecord
User.objects.create_user(username="erin", password=%(pw)r, first_name="Erin", last_name="Walsh")
DOC = "3f1c2a4e-8b7d-4c6e-9a1b-2d3e4f5a6b7c"
TRAVEL = "7a9b8c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
chunks = [
    ChunkRecord(document_id=DOC, chunk_index=0, document_name="Vacation Policy 2026.pdf", page_number=3,
        section="Annual leave", tags=("public",),
        chunk_text="Every full-time employee receives 25 vacation days per year. Vacation days are requested "
        "through the HR portal at least two weeks in advance and approved by the team lead. " +
        "Part-time employees receive vacation days pro rata to their contracted hours. " * 8),
    ChunkRecord(document_id=DOC, chunk_index=1, document_name="Vacation Policy 2026.pdf", page_number=4,
        section="Carry-over", tags=("public",),
        chunk_text="Up to five unused vacation days carry over into the next year and expire on March 31."),
    ChunkRecord(document_id=TRAVEL, chunk_index=0, document_name="Travel & Expenses.docx", page_number=None,
        section="Meals", tags=("public",),
        chunk_text="Vacation days booked during a business trip are not reimbursed; meals are covered up to 50 euros per day."),
]
async def index():
    service = await runtime.ready_vector_service()
    await service.upsert_chunks(chunks)
asyncio.run(index())
runtime.reset()
"""


@pytest.fixture(scope="module")
def chat_server(tmp_path_factory, ollama_server):
    server = seeded_server(tmp_path_factory, ollama_server, name="chat-browser", setup=SETUP % {"pw": PASSWORD})
    yield server.url
    server.stop()


@pytest.fixture
def browser(chromium):
    return chromium


def _sign_in(browser, base: str, *, width: int, height: int, mobile: bool = False):
    return signed_in(browser, base, "erin", PASSWORD, width=width, height=height, mobile=mobile)


def _new_chat(page):
    """The landing page offers the composer: the chat begins with the first question sent there."""
    page.click(".new-chat a")
    page.wait_for_selector("#composer[action='/chat/new/'] #question")
    # Enter sends only once chat.js (deferred) has run: the element exists before that.
    page.wait_for_load_state("load")


def test_ask_stream_hover_reload_and_screenshots(chat_server, browser, fake_ollama):
    ARTIFACTS.mkdir(exist_ok=True)
    doc = "3f1c2a4e-8b7d-4c6e-9a1b-2d3e4f5a6b7c"
    answer = (
        "Full-time employees get **25 vacation days** per year [SourceId: " + doc + ":0]. "
        "Requests go through the HR portal at least two weeks ahead [SourceId: " + doc + ":0].\n\n"
        "- Part-time staff get days *pro rata* [SourceId: " + doc + ":0]\n"
        "- Up to five unused days carry over until March 31 [SourceId: " + doc + ":1]\n\n"
        "Ask HR if your contract is special."
    )
    fake_ollama.reply(answer)
    fake_ollama.rating(90)
    fake_ollama.token_delay(0.03)
    context, page = _sign_in(browser, chat_server, width=1280, height=860)
    _new_chat(page)

    page.fill("#question", "How many vacation days do I get per year?")
    page.keyboard.press("Enter")

    # Tokens arrive before the answer completes: the draft shows text while still streaming. The
    # wait covers this fresh server's first answer (its first retrieval) on a loaded CI machine.
    page.wait_for_selector("article.status-streaming .msg-body p", timeout=ANSWER_WAIT_MS)
    streaming_text = page.inner_text("article.status-streaming .msg-body")
    assert streaming_text.strip() and "Ask HR" not in streaming_text
    page.wait_for_selector("article.msg-assistant.status-complete", timeout=ANSWER_WAIT_MS)
    assert page.input_value("#question") == ""
    body = page.inner_text("article.status-complete .msg-body")
    assert "25 vacation days" in body and "SourceId" not in body
    assert page.locator("article.status-complete .msg-body .cite-marker").count() == 4  # 1,1,1,2
    assert page.locator("article.status-complete .sources-list li").count() == 2

    # Hover a marker: the card shows the 200-char snippet, then expands to the full passage.
    marker = page.locator("article.status-complete .cite-marker").first
    marker.hover()
    card = page.locator("article.status-complete .cite-card").first
    card.wait_for(state="visible")
    assert "Vacation Policy 2026.pdf" in card.inner_text() and "Page 3" in card.inner_text()
    short = page.locator("article.status-complete .cite-snippet").first
    assert short.is_visible() and len(short.inner_text()) <= 205
    full = page.locator("article.status-complete .cite-full").first
    full.wait_for(state="visible", timeout=3000)
    assert len(full.inner_text()) > 500
    page.screenshot(path=str(ARTIFACTS / "chat-desktop-card.png"))
    page.mouse.move(5, 5)

    # Keyboard: focusing a marker shows its card too.
    page.locator("article.status-complete .cite-marker").nth(3).focus()
    assert page.locator("article.status-complete .cite-card").nth(3).is_visible()
    page.locator("article.status-complete .conf-dot").click()
    page.screenshot(path=str(ARTIFACTS / "chat-desktop.png"))

    # Reload: the same answer, rendered server-side.
    page.reload()
    page.wait_for_selector("article.msg-assistant.status-complete")
    assert page.inner_text("article.status-complete .msg-body") == body

    # Phone width.
    url = page.url
    context.close()
    context, page = _sign_in(browser, chat_server, width=390, height=844, mobile=True)
    page.goto(url)
    page.wait_for_selector("article.msg-assistant.status-complete")
    page.screenshot(path=str(ARTIFACTS / "chat-phone.png"))
    page.locator("article.status-complete .cite-marker").first.tap()
    page.locator("article.status-complete .cite-card").first.wait_for(state="visible")
    page.screenshot(path=str(ARTIFACTS / "chat-phone-card.png"))
    context.close()


def test_citations_ragchat_attributed_are_marked_as_such(chat_server, browser, fake_ollama):
    """A model that writes no citation: the supported sentences get their passages' markers,
    outlined, with "Attributed by ragchat" in the card; the unsupported one gets none."""
    ARTIFACTS.mkdir(exist_ok=True)
    fake_ollama.reply(
        "Full-time employees get **25 vacation days** per year. "
        "Up to five unused vacation days carry over into the next year and expire on March 31.\n\n"
        "Ask HR if your contract is special."
    )
    fake_ollama.rating(90)
    context, page = _sign_in(browser, chat_server, width=1280, height=860)
    _new_chat(page)
    page.fill("#question", "How many vacation days do I get, and do they carry over?")
    page.keyboard.press("Enter")
    page.wait_for_selector("article.msg-assistant.status-complete", timeout=ANSWER_WAIT_MS)
    answer = page.locator("article.status-complete .msg-body")
    assert answer.locator(".cite-marker").count() == 2
    assert answer.locator(".cite.cite-by-ragchat").count() == 2
    assert (
        answer.locator(".cite-marker").first.get_attribute("aria-label").startswith("Source 1, attributed by ragchat: ")
    )
    sources = page.locator("article.status-complete .sources-list li")
    assert [sources.nth(i).inner_text().endswith("attributed by ragchat") for i in range(2)] == [True, True]
    border = answer.locator(".cite-marker").first.evaluate("e => getComputedStyle(e).borderTopStyle")
    assert border == "dashed"
    assert AXE, "axe-core is missing: run `make axe`"
    assert axe_problems(page, AXE[-1].read_text()) == []  # the outlined markers, before a card opens
    answer.locator(".cite-marker").first.hover()
    card = answer.locator(".cite-card").first
    card.wait_for(state="visible")
    assert "Attributed by ragchat" in card.inner_text() and "Vacation Policy 2026.pdf" in card.inner_text()
    page.screenshot(path=str(ARTIFACTS / "chat-desktop-attributed-card.png"))
    url = page.url
    context.close()

    context, page = _sign_in(browser, chat_server, width=390, height=844, mobile=True)
    page.goto(url)
    page.wait_for_selector("article.msg-assistant.status-complete")
    page.locator("article.status-complete .cite-marker").first.tap()
    card = page.locator("article.status-complete .cite-card").first
    card.wait_for(state="visible")
    assert "Attributed by ragchat" in card.inner_text()
    box = card.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    page.screenshot(path=str(ARTIFACTS / "chat-phone-attributed-card.png"))
    context.close()


def test_failure_shows_sentence_passages_and_retry(chat_server, browser, fake_ollama):
    ARTIFACTS.mkdir(exist_ok=True)
    fake_ollama.reply("Employees get twenty-five vacation days every single year according to the handbook.")
    fake_ollama.stall_after(5, 8)
    context, page = _sign_in(browser, chat_server, width=1280, height=860)
    _new_chat(page)
    page.fill("#question", "How many vacation days do I get?")
    page.click(".composer-send")
    page.wait_for_selector("article.msg-assistant.status-interrupted", timeout=20_000)
    text = page.inner_text("article.status-interrupted")
    assert "Response generation timed out. Please try again." in text
    assert "Vacation Policy 2026.pdf" in text and "Retry" in text and "Ask the owner" in text
    page.screenshot(path=str(ARTIFACTS / "chat-desktop-failure.png"))
    fake_ollama.reset()
    fake_ollama.reply("Twenty-five days [SourceId: 3f1c2a4e-8b7d-4c6e-9a1b-2d3e4f5a6b7c:0].")
    page.click("article.status-interrupted button:has-text('Retry')")
    page.wait_for_selector("article.msg-assistant.status-complete", timeout=20_000)
    context.close()
