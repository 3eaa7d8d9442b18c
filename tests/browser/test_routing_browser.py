"""Routing in a real browser, both people at once: the employee asks what the corpus cannot answer
and sees it routed; the owner watches it arrive in the inbox live, answers it; the answer appears in
the employee's open chat without a reload. Daphne serves the app (subprocess, its own SQLite and
embedded Qdrant); the fake Ollama server is the model. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import time

import pytest

from tests.browser.conftest import ARTIFACTS, seeded_server, signed_in, wait_until

pytestmark = pytest.mark.browser

PASSWORD = "browser-pass-123"
QUESTION = "Can visitors get a parking permit for the garage on weekends?"
ANSWER = "Yes: reception issues weekend day permits for visitors. Ask them on Friday before 4 pm."

SETUP = r"""
import asyncio
from django.core.files.base import ContentFile
from documents.models import Document, Tag
from ragchat import runtime
from ragchat.models import User
from ragchat.services.types import ChunkRecord
erin = User.objects.create_user(username="erin", password=%(pw)r, first_name="Erin", last_name="Walsh",
                                email="erin@example.com")
olivia = User.objects.create_user(username="olivia", password=%(pw)r, first_name="Olivia", last_name="Owens",
                                  email="olivia@example.com")
facilities = Tag.objects.create(name="Facilities", slug="facilities", owner=olivia,
                                description="Buildings, parking, canteen")
facilities.members.add(erin)
DOC = "5b2d7c1e-3a4f-4b6c-8d9e-0f1a2b3c4d5e"
text = ("Parking: the company garage has 40 spaces for employees. A yearly parking permit for the garage "
        "is requested at the facilities desk. The garage is closed on public holidays.")
document = Document(id=DOC, title="Parking and Garage", original_filename="parking.md", content_hash="f" * 64,
                    kind="markdown", status="ready", chunk_count=1, uploaded_by=olivia)
document.file.save("parking.md", ContentFile(text.encode()), save=False)
document.save()
document.tags.set([facilities])
chunks = [ChunkRecord(document_id=DOC, chunk_index=0, document_name="Parking and Garage", chunk_text=text,
                      tags=("facilities",), section="Garage", page_number=None)]
async def index():
    service = await runtime.ready_vector_service()
    await service.upsert_chunks(chunks)
asyncio.run(index())
runtime.reset()
"""


def facilities_server(tmp_path_factory, ollama_server, *, name: str):
    """For a module's `server` fixture (`yield from`): a server of its own seeded with SETUP (Erin
    and Olivia, the Facilities tag, its parking document; mail kept in memory), its URL; stopped
    at the end."""
    server = seeded_server(
        tmp_path_factory,
        ollama_server,
        name=name,
        setup=SETUP % {"pw": PASSWORD},
        extra_env={"EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend"},
    )
    yield server.url
    server.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory, ollama_server):
    yield from facilities_server(tmp_path_factory, ollama_server, name="routing-browser")


@pytest.fixture
def browser(chromium):
    return chromium


def _sign_in(browser, base: str, username: str, *, width: int = 1280, height: int = 860):
    return signed_in(browser, base, username, PASSWORD, width=width, height=height)


def test_employee_and_owner_close_the_loop_live(server, browser, fake_ollama):
    ARTIFACTS.mkdir(exist_ok=True)
    # The corpus has something about the garage but not this: the model hedges and rates itself low.
    fake_ollama.reply("The documents describe the garage for employees but say nothing about visitors on weekends.")
    fake_ollama.rating(5)

    owner_ctx, owner = _sign_in(browser, server, "olivia")
    owner.click("nav.topnav a:has-text('Inbox')")
    owner.wait_for_selector("#inbox-conn[data-state=open]", timeout=10_000)
    assert owner.locator("#inbox-empty").is_visible()

    employee_ctx, employee = _sign_in(browser, server, "erin")
    # The landing page's composer starts a new chat with its first question.
    employee.fill("#question", QUESTION)
    employee.keyboard.press("Enter")
    routed = employee.wait_for_selector("article.msg-assistant.is-route.status-complete", timeout=20_000)
    # Named, once routing has decided: the person and the tag (not a slug, not an email address).
    routed = employee.wait_for_selector(
        "article.msg-assistant.is-route:has-text('sent to Olivia Owens')", timeout=10_000
    )
    notice = routed.inner_text()
    assert "sent to Olivia Owens, the owner of Facilities" in notice and "@" not in notice
    assert "Unverified draft" in notice and routed.query_selector("button:has-text('Ask the owner')") is None

    # The owner's inbox shows it without a reload.
    row = owner.wait_for_selector(f".inbox-row:has-text('{QUESTION}')", timeout=10_000)
    assert "Facilities" in row.inner_text() and "Erin Walsh" in row.inner_text()
    assert owner.inner_text("#inbox-open-count") == "1"
    assert owner.locator("#inbox-empty").is_hidden()
    owner.wait_for_timeout(2700)  # let the "new" highlight fade for the screenshot
    owner.screenshot(path=str(ARTIFACTS / "routing-inbox.png"), full_page=True)

    owner.click(f".inbox-row:has-text('{QUESTION}') a")
    owner.wait_for_selector("#answer-form")
    question_url = owner.url
    page_text = owner.inner_text("main")
    assert "routing to the owner of Facilities" in page_text and "facilities owner" not in page_text
    assert QUESTION in page_text and "Parking and Garage" in page_text and "say nothing about visitors" in page_text
    owner.screenshot(path=str(ARTIFACTS / "routing-question.png"), full_page=True)
    owner.fill("#answer-form textarea", ANSWER)
    owner.click("#answer-form button[type=submit]")
    owner.wait_for_selector(".answer-card:has-text('Answered')")
    # The owner's own badge drops with the question answered (their inbox page has its own socket).
    assert owner.locator("#nav-inbox-count").is_hidden()

    # The employee's open chat gets the answer live, labelled with who answered.
    answer = employee.wait_for_selector("article.msg-owner", timeout=10_000)
    text = answer.inner_text()
    assert "Answer from Olivia Owens" in text and ANSWER.split(":")[0] in text
    assert employee.locator("article.msg-owner time.msg-time").count() == 1
    # The draft it answers no longer says "unverified until they answer", live and after a reload.
    draft = employee.locator("article.msg-assistant.is-route")
    employee.wait_for_selector("article.msg-assistant.is-route .route-answered", state="attached", timeout=10_000)
    assert "Olivia Owens answered your question" in draft.inner_text()
    assert "unverified until they answer" not in draft.inner_text() and "Unverified draft" not in draft.inner_text()
    employee.wait_for_timeout(300)
    employee.screenshot(path=str(ARTIFACTS / "routing-answer-delivered.png"))

    # The owner publishes the answer as verified knowledge: ingested by the server like any upload.
    owner.click(".answer-card button:has-text('Publish as verified knowledge')")
    owner.wait_for_selector(".published", timeout=10_000)
    deadline = time.monotonic() + 30
    while "· Ready" not in owner.inner_text(".published"):
        assert "Failed" not in owner.inner_text(".published")
        assert time.monotonic() < deadline, owner.inner_text(".published")
        owner.wait_for_timeout(500)
        owner.reload()
    owner.screenshot(path=str(ARTIFACTS / "routing-question-answered.png"), full_page=True)

    # The answer reached the open chat tab, so it counts as seen: no unread badge, live.
    deadline = time.monotonic() + 10
    while not employee.evaluate("() => document.getElementById('nav-bell-count').hidden"):
        assert time.monotonic() < deadline
        employee.wait_for_timeout(100)
    url = employee.url
    employee.goto(server + "/routing/mine/")
    assert employee.locator("#nav-bell-count").is_hidden()
    employee.goto(url)
    employee.wait_for_selector("article.msg-owner")
    assert employee.locator("#nav-bell-count").is_hidden()
    assert "Olivia Owens answered your question" in employee.inner_text("article.msg-assistant.is-route")
    assert employee.locator("article.msg-assistant button:has-text('Ask the owner')").count() == 0
    # After the answer: the inbox is clear, the figures count it, at phone width too.
    owner.goto(server + "/routing/inbox/")
    assert owner.locator("#inbox-empty").is_visible()
    figures = owner.inner_text("table.figures")
    assert "Facilities" in figures and "100%" in figures
    owner.screenshot(path=str(ARTIFACTS / "routing-inbox-after.png"), full_page=True)
    phone_ctx, phone = _sign_in(browser, server, "olivia", width=390, height=844)
    phone.goto(server + "/routing/inbox/")
    phone.screenshot(path=str(ARTIFACTS / "routing-inbox-phone.png"), full_page=True)
    # On a phone the answer comes right after the question, before the draft and the sources.
    phone.goto(question_url)
    answer_top = phone.locator(".answer-card").first.bounding_box()["y"]
    assert phone.locator(".question-card").bounding_box()["y"] < answer_top
    assert answer_top < phone.locator(".draft-card").bounding_box()["y"]
    phone.screenshot(path=str(ARTIFACTS / "routing-question-phone.png"), full_page=True)
    phone_ctx.close()
    owner_ctx.close()
    employee_ctx.close()


def test_the_new_answer_badge_appears_live_on_other_pages(server, browser, fake_ollama):
    """The asker is elsewhere in the app (no chat open) when the owner answers: the bell's badge
    shows 1 without a reload, and opening the chat clears it, live on the other page too."""
    fake_ollama.reply("The documents do not say whether the garage has chargers for electric cars.")
    fake_ollama.rating(5)
    employee_ctx, employee = _sign_in(browser, server, "erin")
    employee.fill("#question", "Is there a charger for electric cars in the garage?")
    employee.keyboard.press("Enter")
    employee.wait_for_selector("article.msg-assistant.is-route:has-text('sent to Olivia Owens')", timeout=20_000)
    chat_url = employee.url
    employee.goto(server + "/documents/")
    employee.wait_for_timeout(500)  # its badge socket is open
    assert employee.locator("#nav-bell-count").is_hidden()

    owner_ctx, owner = _sign_in(browser, server, "olivia")
    owner.goto(server + "/routing/inbox/")
    owner.click(".inbox-row:has-text('electric cars') a")
    owner.fill("#answer-form textarea", "Yes: two chargers on level -1, free for employees.")
    owner.click("#answer-form button[type=submit]")
    owner.wait_for_selector(".answer-card:has-text('Answered')")

    wait_until(employee, "() => !document.getElementById('nav-bell-count').hidden")
    assert employee.inner_text("#nav-bell-count") == "1"
    other = employee_ctx.new_page()
    other.goto(server + "/routing/mine/")
    assert other.inner_text("#nav-bell-count") == "1"
    other.goto(chat_url)
    other.wait_for_selector("article.msg-owner:has-text('two chargers')")
    wait_until(employee, "() => document.getElementById('nav-bell-count').hidden")
    owner_ctx.close()
    employee_ctx.close()
