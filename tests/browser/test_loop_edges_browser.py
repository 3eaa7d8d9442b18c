"""The human loop's edges in a real browser (issue 38), at 1280x800 and 390x844:

- one question, one item: the employee's routed question, down-voted and regenerated, is one row
  in the owner's inbox; the owner's one answer settles it in the chat, on "My questions" and on the
  question page, which then says where the question went in a muted line, not the orange notice;
- marking a source outdated asks first, saying what it will affect: in place with htmx, on a page
  of its own without script.

Every page is watched for Content-Security-Policy violations and htmx errors in the console.
Daphne serves the app (subprocess, its own SQLite and embedded Qdrant); the fake Ollama server is
the model. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import pytest

from tests.browser.conftest import ARTIFACTS, WIDTHS, assert_no_sideways_scroll, seeded_server, sign_in
from tests.browser.test_routing_browser import PASSWORD, SETUP

pytestmark = pytest.mark.browser

DOC = "5b2d7c1e-3a4f-4b6c-8d9e-0f1a2b3c4d5e"


@pytest.fixture(scope="module")
def live(tmp_path_factory, ollama_server):
    """This module's server (Erin, Olivia, the Facilities tag and its parking document): tests also
    seed rows while it runs (`manage.py shell`)."""
    server = seeded_server(
        tmp_path_factory,
        ollama_server,
        name="loop-edges-browser",
        setup=SETUP % {"pw": PASSWORD},
        extra_env={"EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend"},
    )
    yield server
    server.stop()


def watched(chromium, server: str, username: str, *, width: int, height: int, script: bool = True):
    """A signed-in page of this size, and the console problems its pages report: CSP violations,
    htmx errors (htmx:oobErrorNoTarget, htmx:responseError…) and any other error."""
    context = chromium.new_context(viewport={"width": width, "height": height}, java_script_enabled=script)
    problems: list[str] = []

    def seen(message) -> None:
        if message.type == "error" or "Content Security Policy" in message.text or "htmx:" in message.text:
            problems.append(f"{message.type}: {message.text}")

    context.on("console", seen)
    page = context.new_page()
    sign_in(page, server, username, PASSWORD)
    return context, page, problems


def _settled_reason_is_muted(page) -> None:
    line = page.locator(".question-reason")
    assert line.count() == 1 and "is-settled" in (line.get_attribute("class") or "")
    assert "sent to the owner of Facilities" in line.inner_text() and "routing to" not in line.inner_text()
    # Not the orange notice: no warning background, the muted text colour.
    background = line.evaluate("el => getComputedStyle(el).backgroundColor")
    assert background in ("rgba(0, 0, 0, 0)", "transparent"), background


def test_one_question_is_one_item_and_one_answer_settles_it(live, chromium, fake_ollama):
    ARTIFACTS.mkdir(exist_ok=True)
    server = live.url
    question = "Can visitors park in the garage on a Saturday evening?"
    employee_ctx, employee, employee_problems = watched(chromium, server, "erin", width=1280, height=800)
    fake_ollama.reply("The documents describe the garage for employees but say nothing about visitors.")
    fake_ollama.rating(5)
    employee.fill("#question", question)
    employee.keyboard.press("Enter")
    draft = employee.wait_for_selector(
        "article.msg-assistant.is-route:has-text('sent to Olivia Owens')", timeout=20_000
    )
    # The employee down-votes the draft, then regenerates it (still unsure: routed by the core).
    employee.locator("article.msg-assistant button.fb-down").click()
    employee.locator("article.msg-assistant label:has-text('Wrong') input").check()
    employee.locator("article.msg-assistant textarea[name=comment]").fill("Visitors park at reception.")
    employee.locator("article.msg-assistant button:has-text('Send feedback')").click()
    employee.wait_for_selector("article.msg-assistant .fb-thanks:has-text('Sent for review: wrong')")
    fake_ollama.reply("The documents still say nothing about visitors parking on Saturdays.")
    fake_ollama.rating(5)
    draft.query_selector("button:has-text('Regenerate')").click()
    second = employee.wait_for_selector(
        "article.msg-assistant.status-complete:not([hidden]):has-text('still say nothing')", timeout=20_000
    )
    assert "2 / 2" in second.inner_text()
    employee.wait_for_selector(
        "article.msg-assistant:not([hidden]):has-text('still say nothing'):has-text('sent to Olivia Owens')",
        timeout=10_000,
    )
    chat_url = employee.url
    employee.goto(server + "/routing/mine/")
    assert employee.locator(f".inbox-row:has-text('{question}')").count() == 1

    # The owner has one item: the routed question, carrying the down vote.
    for width, height in ((1280, 800), (390, 844)):
        ctx, owner, owner_problems = watched(chromium, server, "olivia", width=width, height=height)
        owner.goto(server + "/routing/inbox/")
        rows = owner.locator(f"#inbox-list .inbox-row:has-text('{question}')")
        assert rows.count() == 1 and "Down-voted: wrong" in rows.first.inner_text()
        assert_no_sideways_scroll(owner)
        owner.screenshot(path=str(ARTIFACTS / f"loop-one-item-inbox-{width}.png"), full_page=True)
        assert not owner_problems, owner_problems
        ctx.close()
    owner_ctx, owner, owner_problems = watched(chromium, server, "olivia", width=1280, height=800)
    owner.goto(server + "/routing/inbox/")
    owner.click(f"#inbox-list .inbox-row:has-text('{question}') a")
    owner.wait_for_selector("#answer-form")
    text = owner.inner_text("main")
    assert "Down-voted: wrong" in text and "Visitors park at reception." in text and "Asked 2 times" not in text
    assert owner.locator(".question-reason:not(.is-settled)").count() == 1  # open: the notice, orange
    question_url = owner.url
    owner.fill("#answer-form textarea", "Visitors park at reception's spaces; ask the desk for a day pass.")
    owner.click("#answer-form button[type=submit]")
    owner.wait_for_selector(".answer-card:has-text('Answered')")
    _settled_reason_is_muted(owner)
    owner.screenshot(path=str(ARTIFACTS / "loop-question-answered-1280.png"), full_page=True)
    phone_ctx, phone, phone_problems = watched(chromium, server, "olivia", width=390, height=844)
    phone.goto(question_url)
    _settled_reason_is_muted(phone)
    assert_no_sideways_scroll(phone)
    phone.screenshot(path=str(ARTIFACTS / "loop-question-answered-390.png"), full_page=True)
    assert not owner_problems and not phone_problems, owner_problems + phone_problems
    phone_ctx.close()
    owner_ctx.close()

    # Settled everywhere the employee looks.
    employee.goto(chat_url)
    employee.wait_for_selector("article.msg-owner", timeout=10_000)
    chat = employee.inner_text("#messages")
    assert "unverified until they answer" not in chat and "Olivia Owens answered your question" in chat
    employee.goto(server + "/routing/mine/")
    row = employee.locator(f".inbox-row:has-text('{question}')")
    assert row.count() == 1 and "Answered" in row.inner_text() and "Waiting" not in row.inner_text()
    assert not employee_problems, employee_problems
    employee_ctx.close()


SEED_REVIEW = r"""
import datetime
from django.utils import timezone
from chat.models import AnswerFeedback, ChatSession, Message
from documents.models import Document, Tag
from ragchat.models import User
from routing.models import RoutedQuestion, VerifiedAnswer
DOC = %(doc)r
Q = %(question)r
erin, olivia = User.objects.get(username="erin"), User.objects.get(username="olivia")
tag = Tag.objects.get(slug="facilities")
Document.objects.filter(pk=DOC).update(outdated_at=None, outdated_by=None, outdated_note="")
cite = {"source_id": DOC + ":0", "document_id": DOC, "document_name": "Parking and Garage", "chunk_index": 0,
        "snippet": "A yearly parking permit for the garage is requested at the facilities desk.",
        "relevance_score": 0.8}
session = ChatSession.objects.create(owner=erin, title=Q)
asked = Message.objects.create(session=session, role="user", content=Q)
answer = Message.objects.create(session=session, role="assistant", content="At the facilities desk [1].",
                                citations=[cite], passages=[cite], reply_to=asked, action="CITE")
feedback = AnswerFeedback.objects.create(message=answer, user=erin, vote=-1, reason="outdated")
item = RoutedQuestion.objects.create(asker=erin, session=session, message=answer, question_message=asked,
                                     tag=tag, target=olivia, reason="Review: Routing to facilities owner",
                                     origin="feedback", feedback=feedback, question=Q,
                                     citations=[{**cite, "cited": True}], draft=answer.content)
verified, _ = VerifiedAnswer.objects.get_or_create(
    tag=tag, question="Who issues yearly garage permits?",
    defaults=dict(answer="The facilities desk.", verified_by=olivia, verified_at=timezone.now(),
                  review_by=timezone.localdate() + datetime.timedelta(days=90)))
VerifiedAnswer.objects.filter(pk=verified.pk).update(status="verified", verified_at=timezone.now())
verified.relied_on.add(DOC)
print(item.pk)
"""


def _seed_review(live, question: str) -> int:
    """An open review item of Olivia's (Erin down-voted an answer citing the parking document), and
    a verified answer that relies on that document; the document not marked outdated."""
    return int(live.shell(SEED_REVIEW % {"doc": DOC, "question": question}).strip().splitlines()[-1])


@pytest.mark.parametrize("script", [pytest.param(True, id="htmx"), pytest.param(False, id="no-script")])
@pytest.mark.parametrize("width,height", WIDTHS)
def test_marking_a_source_outdated_asks_first_saying_what_it_affects(live, chromium, width, height, script):
    server = live.url
    label = f"{'htmx' if script else 'noscript'}-{width}"
    item = _seed_review(live, f"Is the garage still closed on public holidays ({label})?")
    context, owner, problems = watched(chromium, server, "olivia", width=width, height=height, script=script)
    question_url = f"{server}/routing/q/{item}/"
    owner.goto(question_url)
    owner.select_option("#outdated-doc", label="Parking and Garage")
    owner.fill("#outdated-note", "The garage opens on holidays since 2026.")
    owner.click("#outdated-form button[type=submit]")

    # It asks first, saying what it will affect; nothing has changed yet.
    card = owner.wait_for_selector("#outdated-card:has-text('Mark “Parking and Garage” outdated?')")
    text = " ".join(card.inner_text().split())
    assert "send 1 verified answer to “Needs review”" in text and "Who issues yearly garage permits?" in text
    assert "put a warning on its citations in" in text and "tell its uploader, Olivia Owens, by email" in text
    assert "The garage opens on holidays since 2026." in text
    if script:
        assert owner.url == question_url  # in place: the rest of the page is still there
        assert owner.locator("#answer-form").count() == 1
    else:
        assert owner.url.endswith(f"/routing/q/{item}/outdated/")  # a page of its own
        assert owner.title() == "Mark “Parking and Garage” outdated? · ragchat"
    card.scroll_into_view_if_needed()
    assert_no_sideways_scroll(owner)
    owner.screenshot(path=str(ARTIFACTS / f"loop-outdated-confirm-{label}.png"), full_page=not script)
    assert "None" not in owner.inner_text(".outdated-card")

    owner.click("#outdated-confirm-form button:has-text('Mark outdated')")
    owner.wait_for_selector(".answer-card:has-text('Source marked outdated')", timeout=10_000)
    assert owner.url == question_url
    assert "is marked outdated" in owner.inner_text("main") or "is marked outdated" in owner.inner_text("body")
    owner.wait_for_selector(".src-outdated:has-text('opens on holidays')")
    owner.screenshot(path=str(ARTIFACTS / f"loop-outdated-done-{label}.png"), full_page=True)
    assert not problems, problems
    context.close()


@pytest.mark.parametrize("width,height", WIDTHS)
def test_the_outdated_question_passes_axe(live, chromium, width, height):
    """The card that asks before a source is marked outdated has no serious accessibility problem."""
    from tests.browser.test_axe_browser import AXE, axe_problems

    assert AXE, "axe-core is missing: run `make axe` (make test does)"
    item = _seed_review(live, f"Are garage permits still yearly (axe {width})?")
    context = chromium.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    sign_in(page, live.url, "olivia", PASSWORD)
    page.goto(f"{live.url}/routing/q/{item}/")
    page.fill("#outdated-note", "Permits are monthly since 2026.")
    page.click("#outdated-form button[type=submit]")
    page.wait_for_selector("#outdated-confirm-form")
    assert not axe_problems(page, AXE[-1].read_text())
    context.close()
