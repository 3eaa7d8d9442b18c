"""The error pages in a real browser, on a server with DEBUG off as in production (the other browser
tests' servers run with DEBUG on, which shows Django's debug pages instead): a chat that is not
yours, a request the server cannot read (400), a form that expired because you signed in again in
another tab; and an htmx action after the session ended, which leads to the sign-in page. Each is
the app's page under its Content-Security-Policy (no violation), passes axe-core, and is screenshot
at desktop and phone widths (test-artifacts/)."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.browser.conftest import (
    ARTIFACTS,
    WIDTHS,
    assert_no_sideways_scroll,
    csp_signed_in,
    seeded_server,
    sign_in,
)
from tests.browser.test_axe_browser import AXE, axe_problems
from tests.browser.test_csp_browser import SETUP

pytestmark = pytest.mark.browser

NOT_FOUND = "There is nothing to show at this address."
# The expired-form sentence (templates/_form_expired.html): said on the page whose form expired
# (an htmx action's message) and, on the page that replaces it, of the page the form was on.
EXPIRED = (
    "This page was open too long, or you signed in again in another tab, so its form expired and nothing was sent."
)
EXPIRED_PAGE = (
    "The page you came from was open too long, or you signed in again in another tab, so its form expired and "
    "nothing was sent. Open it again and try once more."
)
NOT_UNDERSTOOD = (
    "Your browser sent a request the server could not understand, so nothing was changed. Go back and try again; "
    "if it keeps happening, tell your administrator."
)
# An address Django refuses to read (more fields than DATA_UPLOAD_MAX_NUMBER_FIELDS): a real 400.
NOT_UNDERSTOOD_PATH = "/documents/?" + "&".join(["q=x"] * 1001)


@pytest.fixture(scope="module")
def server(tmp_path_factory, ollama_server):
    server = seeded_server(
        tmp_path_factory, ollama_server, name="error-pages", setup=SETUP, extra_env={"DJANGO_DEBUG": "false"}
    )
    yield server, json.loads(server.setup_output.strip().splitlines()[-1])
    server.stop()


def _sign_out_in_another_tab(context, live, *, then_sign_in: bool = False) -> None:
    """Emma signs out in a second tab: the first tab's session has ended. `then_sign_in`: and in
    again, so that the first tab's CSRF token is stale too."""
    second = context.new_page()
    second.goto(live.url + "/")
    second.click("form.topbar-user button[type=submit]")  # Sign out
    second.wait_for_url("**/accounts/login/**")
    if then_sign_in:
        sign_in(second, live.url, "emma", "pw-emma-12345")
    second.close()


def _sign_in_again_in_another_tab(context, live) -> None:
    _sign_out_in_another_tab(context, live, then_sign_in=True)


def _session_cookie_gone(context, live) -> None:
    context.clear_cookies(name="sessionid")  # as when the session expires


def _looks_right(page, heading: str, sentence: str, screenshot: str, way_on=("Back to your chats", "/")) -> None:
    main = page.inner_text("main")
    assert page.locator("h1").inner_text() == heading and sentence in main
    assert page.locator(
        "header.topbar .topbar-bell"
    ).is_visible()  # signed in: the app's own top bar (its nav folds on phones)
    back = page.locator("main a.btn")
    assert back.count() == 1  # one way on
    assert (back.inner_text(), back.get_attribute("href")) == way_on
    assert "btn-primary" in back.get_attribute("class")
    assert_no_sideways_scroll(page)
    page.screenshot(path=str(ARTIFACTS / screenshot), full_page=True)


@pytest.mark.parametrize("width,height", WIDTHS)
def test_someone_elses_chat_is_the_product_404(server, chromium, width, height):
    live, ids = server
    ARTIFACTS.mkdir(exist_ok=True)
    label = "desktop" if width > 600 else "phone"
    context, page, violations = csp_signed_in(chromium, width, height, live.url, "fiona", "pw-fiona-12345")
    missing = page.goto(f"{live.url}/chat/{uuid.uuid4()}/")
    assert missing.status == 404
    missing_text = page.inner_text("main")
    response = page.goto(f"{live.url}/chat/{ids['s1']}/")  # Emma's chat
    assert response.status == 404 and page.inner_text("main") == missing_text
    _looks_right(page, "Page not found", NOT_FOUND, f"error-404-{label}.png")
    assert not violations, violations
    context.close()


@pytest.mark.parametrize("width,height", WIDTHS)
def test_a_request_the_server_cannot_understand_gets_the_400_page(server, chromium, width, height):
    live, ids = server
    label = "desktop" if width > 600 else "phone"
    context, page, violations = csp_signed_in(chromium, width, height, live.url, "fiona", "pw-fiona-12345")
    assert page.goto(live.url + NOT_UNDERSTOOD_PATH).status == 400
    assert page.title() == "Request not understood · ragchat"
    _looks_right(page, "Request not understood", NOT_UNDERSTOOD, f"error-400-{label}.png")
    assert not violations, violations
    context.close()


@pytest.mark.parametrize("width,height", WIDTHS)
def test_a_form_left_open_across_a_new_sign_in_gets_the_expired_page(server, chromium, width, height):
    """Emma's chat is open in one tab; in another she signs out and in again (a new CSRF token);
    back in the first tab she renames the chat: the expired-form page, and the chat keeps its name.
    Its button opens the chat again, where renaming now works."""
    live, ids = server
    label = "desktop" if width > 600 else "phone"
    context, first, violations = csp_signed_in(chromium, width, height, live.url, "emma", "pw-emma-12345")
    chat_url = f"{live.url}/chat/{ids['s1']}/"
    first.goto(chat_url)
    title = first.inner_text("#chat-title")

    _sign_in_again_in_another_tab(context, live)

    first.click(".chat-menu summary")
    first.fill("#rename-title", "Renamed from a stale page")
    with first.expect_navigation() as navigation:
        first.click(".chat-menu button:has-text('Save name')")
    assert navigation.value.status == 403
    chat_path = f"/chat/{ids['s1']}/"
    _looks_right(first, "The form expired", EXPIRED_PAGE, f"error-csrf-{label}.png", ("Open the page again", chat_path))
    with first.expect_navigation():
        first.click("main a:has-text('Open the page again')")
    assert first.url == chat_url and first.inner_text("#chat-title") == title  # nothing was renamed
    first.click(".chat-menu summary")
    first.fill("#rename-title", "Renamed after opening it again")
    with first.expect_navigation() as navigation:
        first.click(".chat-menu button:has-text('Save name')")
    assert navigation.value.status == 200 and first.inner_text("#chat-title") == "Renamed after opening it again"
    first.click(".chat-menu summary")  # the name it had, for the other tests
    first.fill("#rename-title", title)
    with first.expect_navigation():
        first.click(".chat-menu button:has-text('Save name')")
    assert first.inner_text("#chat-title") == title
    assert not violations, violations
    context.close()


@pytest.mark.parametrize("width,height", WIDTHS)
def test_an_htmx_action_on_a_page_left_open_across_a_new_sign_in_says_so(server, chromium, width, height):
    """The same stale page, but the action is htmx's (a vote on an answer: no page load, and htmx
    shows no refused response): the expired-form sentence appears at the top of the page with a link
    that reloads it, the vote is not recorded, and after the reload the vote works."""
    live, ids = server
    label = "desktop" if width > 600 else "phone"
    context, first, violations = csp_signed_in(chromium, width, height, live.url, "emma", "pw-emma-12345")
    chat_url = f"{live.url}/chat/{ids['s1']}/"
    first.goto(chat_url)
    feedback = first.locator("article.msg-assistant .feedback").first
    feedback_id = feedback.get_attribute("id")
    assert feedback.get_attribute("data-vote") == "0"
    assert first.locator("#flash").is_hidden()  # empty: nothing said

    _sign_in_again_in_another_tab(context, live)

    with first.expect_response(lambda r: "/feedback/" in r.url) as refused:
        first.click(f"#{feedback_id} button.fb-up")
    assert refused.value.status == 403
    alert = first.locator("#flash .flash-error[role=alert]")
    alert.wait_for(state="visible", timeout=5_000)
    assert EXPIRED in alert.inner_text()
    assert first.locator("#flash p").count() == 1  # the server's sentence, and no other said over it
    assert first.url == chat_url and first.locator(f"#{feedback_id}").get_attribute("data-vote") == "0"
    reload = alert.locator("a", has_text="Reload the page")
    assert reload.get_attribute("href") == f"/chat/{ids['s1']}/"
    assert_no_sideways_scroll(first)
    first.screenshot(path=str(ARTIFACTS / f"error-csrf-htmx-{label}.png"))

    with first.expect_navigation():
        reload.click()
    assert first.locator(f"#{feedback_id}").get_attribute("data-vote") == "0"  # nothing was recorded
    assert first.locator("#flash").is_hidden()
    first.click(f"#{feedback_id} button.fb-up")
    first.wait_for_selector(f"#{feedback_id}[data-vote='1']")
    first.click(f"#{feedback_id} button.fb-up")  # undone: the chat as it was, for the other tests
    first.wait_for_selector(f"#{feedback_id}[data-vote='0']")
    assert first.locator("#flash .flash-error").count() == 0
    assert not violations, violations
    context.close()


@pytest.mark.parametrize("ended", [_sign_out_in_another_tab, _session_cookie_gone], ids=["other-tab", "expired"])
@pytest.mark.parametrize("width,height", WIDTHS)
def test_an_htmx_action_after_the_session_ended_goes_to_the_sign_in_page(server, chromium, width, height, ended):
    """Emma's chat is open; her session ends (signed out in another tab, or expired); she votes on an
    answer (an htmx action): the browser goes to the sign-in page, the whole page and not a sign-in
    page inside the vote bar, and signing in brings her back to her chat. Nothing was recorded."""
    live, ids = server
    label = "desktop" if width > 600 else "phone"
    context, page, violations = csp_signed_in(chromium, width, height, live.url, "emma", "pw-emma-12345")
    chat_path = f"/chat/{ids['s1']}/"
    page.goto(live.url + chat_path)
    feedback_id = page.locator("article.msg-assistant .feedback").first.get_attribute("id")
    assert page.locator(f"#{feedback_id}").get_attribute("data-vote") == "0"

    ended(context, live)

    with page.expect_navigation(url=f"{live.url}/accounts/login/**"):
        page.click(f"#{feedback_id} button.fb-up")
    assert page.url == f"{live.url}/accounts/login/?next={chat_path}"
    # One page: one top bar, one main, one sign-in form, and no vote bar around it.
    assert page.title() == "Sign in · ragchat"
    assert page.locator("header.topbar").count() == 1 and page.locator("main").count() == 1
    assert page.locator("form[action='/accounts/login/']").count() == 1 and page.locator(".feedback").count() == 0
    assert page.locator("h1").inner_text() == "Sign in"
    assert_no_sideways_scroll(page)
    page.screenshot(path=str(ARTIFACTS / f"signed-out-htmx-{ended.__name__.strip('_')}-{label}.png"), full_page=True)

    page.fill("input[name=username]", "emma")
    page.fill("input[name=password]", "pw-emma-12345")
    with page.expect_navigation():
        page.click("main button[type=submit]")
    assert page.url == live.url + chat_path  # back where she was
    assert page.locator(f"#{feedback_id}").get_attribute("data-vote") == "0"  # nothing was recorded
    assert not violations, violations
    context.close()


@pytest.mark.parametrize(
    "view",
    [
        pytest.param({"viewport": {"width": 1280, "height": 800}, "color_scheme": "light"}, id="desktop-light"),
        pytest.param({"viewport": {"width": 1280, "height": 800}, "color_scheme": "dark"}, id="desktop-dark"),
        pytest.param({"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}, id="phone"),
    ],
)
def test_the_error_pages_pass_axe(server, chromium, view):
    assert AXE, "axe-core is missing: run `make axe` (make test does)"
    live, ids = server
    context = chromium.new_context(**view)
    page = context.new_page()
    assert page.goto(live.url + "/no/such/page/").status == 404  # not signed in: "Sign in"
    problems = {"404 signed out": axe_problems(page, AXE[-1].read_text())}
    sign_in(page, live.url, "emma", "pw-emma-12345")
    page.goto(f"{live.url}/chat/{uuid.uuid4()}/")
    problems["404"] = axe_problems(page, AXE[-1].read_text())
    page.goto(f"{live.url}/chat/{ids['s1']}/")
    # A token that is not the cookie's, as an old page's would be: the expired-form page.
    page.locator(".chat-menu input[name=csrfmiddlewaretoken]").first.evaluate("i => { i.value = 'x'.repeat(64); }")
    page.click(".chat-menu summary")
    with page.expect_navigation() as navigation:
        page.click(".chat-menu button:has-text('Save name')")
    assert navigation.value.status == 403 and EXPIRED_PAGE in page.inner_text("main")
    problems["403 CSRF"] = axe_problems(page, AXE[-1].read_text())
    assert page.goto(live.url + NOT_UNDERSTOOD_PATH).status == 400
    problems["400"] = axe_problems(page, AXE[-1].read_text())
    problems = {k: v for k, v in problems.items() if v}
    context.close()
    assert not problems, json.dumps(problems, indent=1)
