"""Feedback and review in a real browser, both people at once: the employee down-votes an answer
with a reason and a comment; the owner opens the review item and corrects it, and the correction
appears in the employee's open chat; on a second answer the owner marks the cited document outdated
and the citation card warns about it. Daphne serves the app (subprocess, its own SQLite and
embedded Qdrant); the fake Ollama server is the model. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import pytest

from tests.browser.conftest import ARTIFACTS, sign_in
from tests.browser.test_routing_browser import PASSWORD, _sign_in, facilities_server

pytestmark = pytest.mark.browser

QUESTION = "How do I get a yearly parking permit for the garage?"
COMMENT = "The desk moved to reception in October."
CORRECTION = "Since October, yearly garage permits are issued at reception, not the facilities desk."


@pytest.fixture(scope="module")
def server(tmp_path_factory, ollama_server):
    yield from facilities_server(tmp_path_factory, ollama_server, name="feedback-browser")


def _ask_cited(page, fake, question: str):
    fake.reply_citing(1, words=30, prefix="A yearly permit is requested at the facilities desk.")
    fake.rating(100)
    page.fill("#question", question)
    page.keyboard.press("Enter")
    return page.wait_for_selector("article.msg-assistant.status-complete .feedback", timeout=20_000)


def test_down_vote_review_and_correction(server, chromium, fake_ollama):
    ARTIFACTS.mkdir(exist_ok=True)
    employee_ctx, employee = _sign_in(chromium, server, "erin")
    _ask_cited(employee, fake_ollama, QUESTION)
    answer = employee.locator("article.msg-assistant").last
    up, down = answer.locator("button.fb-up"), answer.locator("button.fb-down")
    assert up.get_attribute("aria-pressed") == "false" and down.get_attribute("aria-label") == "Not helpful"

    # Up, then change to down: the reason form opens inline.
    up.click()
    employee.wait_for_selector("article.msg-assistant .feedback[data-vote='1']")
    assert answer.locator("button.fb-up").get_attribute("aria-pressed") == "true"
    answer.locator("button.fb-down").click()
    employee.wait_for_selector("article.msg-assistant .feedback[data-vote='-1'] details[open] .fb-form")
    assert answer.locator("button.fb-down").get_attribute("aria-pressed") == "true"
    assert answer.locator("button.fb-up").get_attribute("aria-pressed") == "false"
    answer.locator("label:has-text('Outdated') input").check()
    answer.locator("textarea[name=comment]").fill(COMMENT)
    employee.screenshot(path=str(ARTIFACTS / "feedback-chat-downvote-form.png"), full_page=True)
    answer.locator("button:has-text('Send feedback')").click()
    employee.wait_for_selector("article.msg-assistant .fb-thanks:has-text('Sent for review: outdated')")
    chat_url = employee.url

    # It persists on reload.
    employee.reload()
    employee.wait_for_selector("article.msg-assistant .feedback[data-vote='-1']")
    assert "Sent for review: outdated" in employee.inner_text("article.msg-assistant .feedback")
    employee.screenshot(path=str(ARTIFACTS / "feedback-chat-voted.png"), full_page=True)
    phone_ctx, phone = _sign_in(chromium, server, "erin", width=390, height=844)
    phone.goto(chat_url)
    phone.click("article.msg-assistant .fb-reason summary")
    phone.wait_for_selector("article.msg-assistant .fb-form")
    phone.locator("article.msg-assistant .fb-form button[type=submit]").scroll_into_view_if_needed()
    phone.screenshot(path=str(ARTIFACTS / "feedback-chat-phone.png"))
    phone_ctx.close()

    # The owner finds it in the inbox as a review item and opens it.
    owner_ctx, owner = _sign_in(chromium, server, "olivia")
    owner.goto(server + "/routing/inbox/")
    row = owner.wait_for_selector(f".inbox-row:has-text('{QUESTION}')")
    assert "Down-voted: outdated" in row.inner_text()
    row.query_selector("a").click()
    owner.wait_for_selector("#answer-form")
    text = owner.inner_text("main")
    assert "Down-voted: outdated" in text and COMMENT in text and "The answer that was given" in text
    assert "Parking and Garage" in text and "Mark a source outdated" in text
    owner.screenshot(path=str(ARTIFACTS / "feedback-review-item.png"), full_page=True)
    review_url = owner.url
    owner_phone_ctx, owner_phone = _sign_in(chromium, server, "olivia", width=390, height=844)
    owner_phone.goto(review_url)
    owner_phone.screenshot(path=str(ARTIFACTS / "feedback-review-item-phone.png"), full_page=True)
    owner_phone_ctx.close()

    # The owner corrects it: the correction reaches the employee's open chat live.
    employee.goto(chat_url)
    employee.wait_for_selector("article.msg-assistant .feedback")
    employee.wait_for_timeout(500)  # its socket is open
    owner.fill("#answer-form textarea", CORRECTION)
    owner.click("#answer-form button[type=submit]")
    owner.wait_for_selector(".answer-card:has-text('Corrected')")
    delivered = employee.wait_for_selector("article.msg-owner", timeout=10_000)
    assert "Answer from Olivia Owens" in delivered.inner_text() and "issued at reception" in delivered.inner_text()
    # The correction itself can be rated too.
    assert employee.locator("article.msg-owner .feedback button.fb-up").count() == 1
    employee.screenshot(path=str(ARTIFACTS / "feedback-correction-delivered.png"), full_page=True)
    owner_ctx.close()
    employee_ctx.close()


def test_mark_source_outdated_warns_on_the_citation(server, chromium, fake_ollama):
    employee_ctx, employee = _sign_in(chromium, server, "erin")
    _ask_cited(employee, fake_ollama, "Is the garage open on public holidays?")
    answer = employee.locator("article.msg-assistant").last
    answer.locator("button.fb-down").click()
    answer.locator("label:has-text('Wrong') input").check()
    answer.locator("button:has-text('Send feedback')").click()
    employee.wait_for_selector("article.msg-assistant .fb-thanks:has-text('Sent for review: wrong')")
    assert answer.locator(".cite-outdated").count() == 0

    owner_ctx, owner = _sign_in(chromium, server, "olivia")
    owner.goto(server + "/routing/inbox/")
    owner.click(".inbox-row:has-text('public holidays') a")
    owner.select_option("#outdated-doc", label="Parking and Garage")
    owner.fill("#outdated-note", "The garage opens on holidays since 2026.")
    owner.click("#outdated-form button[type=submit]")
    # It asks first, saying what it will affect (tests/browser/test_loop_edges_browser.py looks closer).
    owner.wait_for_selector("#outdated-card:has-text('Mark “Parking and Garage” outdated?')")
    owner.click("#outdated-confirm-form button:has-text('Mark outdated')")
    owner.wait_for_selector(".answer-card:has-text('Source marked outdated')")
    owner.wait_for_selector(".src-outdated:has-text('opens on holidays')")

    # The employee's open chat re-renders the answer: its citation card warns (hover shows it).
    employee.wait_for_selector("article.msg-assistant .cite-outdated", state="attached", timeout=10_000)
    marker = answer.locator(".cite-marker").first
    marker.hover()
    card = answer.locator(".cite-card").first
    card.wait_for(state="visible")
    assert "Marked outdated by its owner: The garage opens on holidays since 2026." in card.inner_text()
    employee.screenshot(path=str(ARTIFACTS / "feedback-citation-outdated.png"), full_page=False)
    # The documents list and the document page show it too.
    employee.goto(server + "/documents/")
    assert "Outdated" in employee.inner_text("#doc-5b2d7c1e-3a4f-4b6c-8d9e-0f1a2b3c4d5e")
    owner_ctx.close()
    employee_ctx.close()


def test_vote_without_script_and_ask_the_owner_with_it(server, chromium, fake_ollama):
    """The answer's forms post in a browser without script (the page's CSRF token is in them) and,
    on an answer the websocket rendered (no token in the form), through htmx's header. Without
    script the page says the live chat needs it and hides what would do nothing."""
    employee_ctx, employee = _sign_in(chromium, server, "erin")
    _ask_cited(employee, fake_ollama, "Where do I pick up the garage permit?")
    chat_url = employee.url
    # With script: the live controls, and no word about script.
    for selector in SCRIPT_ONLY:
        assert employee.locator(f"{selector}:visible").count() >= 1, selector
    assert employee.locator(".noscript-note").count() == 0 and "needs JavaScript" not in employee.inner_text("body")

    no_script = chromium.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 860})
    page = no_script.new_page()
    sign_in(page, server, "erin", PASSWORD)
    page.goto(chat_url)
    _chat_without_script_is_honest(page, "chat-no-script-desktop.png")
    page.locator("article.msg-assistant").last.locator("button.fb-up").click()
    page.wait_for_selector("article.msg-assistant .feedback[data-vote='1']")
    assert "Thanks for the feedback." in page.inner_text("article.msg-assistant .feedback")
    answer_id = page.locator("article.msg-assistant").last.get_attribute("id")

    # A refused vote (the form of an old page, or a hand-made one, that says neither helpful nor not
    # helpful): back on the chat page at the answer, the reason said at the top; the vote is kept.
    _refused_vote_without_script(page, chat_url, answer_id, "feedback-refused-no-script.png")
    assert page.locator("article.msg-assistant .feedback[data-vote='1']").count() == 1
    no_script.close()
    phone = chromium.new_context(java_script_enabled=False, viewport={"width": 390, "height": 844})
    page = phone.new_page()
    sign_in(page, server, "erin", PASSWORD)
    page.goto(chat_url)
    _chat_without_script_is_honest(page, "chat-no-script-phone.png")
    _refused_vote_without_script(page, chat_url, answer_id, "feedback-refused-no-script-phone.png")
    phone.close()

    answer = employee.locator("article.msg-assistant").last
    answer.locator("button.btn-ask").click()
    # Sent through htmx (no page load); the answer re-renders live as sent to a person.
    employee.wait_for_selector("article.msg-assistant .route-notice:has-text('You asked Olivia Owens')")
    assert employee.url == chat_url and answer.locator("button.btn-ask").count() == 0
    employee_ctx.close()


# What needs script on the chat page: the composer (its questions go over the websocket), the
# connection state, Regenerate and Copy on the last answer, the theme switch.
SCRIPT_ONLY = ("#composer", "#conn", ".regen", ".msg-copy", ".theme-switch")


def _chat_without_script_is_honest(page, screenshot: str) -> None:
    """Without script the chat page says the live chat needs it, instead of "Connecting…" forever,
    and shows no control that would do nothing; the answer's forms that post without script (the
    vote, "Ask the owner") and the chat's own history stay."""
    notice = page.locator(".noscript-note")
    assert notice.is_visible() and notice.inner_text().startswith("The live chat needs JavaScript")
    for selector in (*SCRIPT_ONLY, ".chat-drawer-toggle", ".stop-form", ".cite-close", ".cite-more"):
        assert page.locator(f"{selector}:visible").count() == 0, selector
    assert "Connecting" not in page.inner_text("body")
    answer = page.locator("article.msg-assistant").last
    assert answer.locator(".msg-body").is_visible() and answer.locator(".cite-marker").first.is_visible()
    assert answer.locator("button.fb-up").is_visible() and answer.locator("button.btn-ask").is_visible()
    page.screenshot(path=str(ARTIFACTS / screenshot), full_page=True)


def _refused_vote_without_script(page, chat_url: str, answer_id: str, screenshot: str) -> None:
    """Vote with a value the server refuses, in a browser without script (Playwright sets the button's
    value; the page runs none of its own script), and check where the person ends up."""
    vote = page.locator(f"#{answer_id} button.fb-up")
    vote.evaluate("button => { button.value = '2'; }")
    vote.click()
    page.wait_for_selector(".flash .flash-error")
    assert page.url == f"{chat_url}#{answer_id}"
    assert page.inner_text(".flash").strip() == "Choose helpful or not helpful."
    assert page.locator(".flash").is_visible() and page.locator(f"#{answer_id} .feedback").is_visible()
    assert page.locator("#messages").count() == 1  # the chat page itself, not a fragment
    page.screenshot(path=str(ARTIFACTS / screenshot))
    page.reload()  # said once
    assert page.locator(".flash p").count() == 0 and page.locator(".flash").is_hidden()
