"""Deleting documents and website sources, revoking tokens, and htmx actions that fail, in Chromium
with script off and on, on a server with DEBUG off as in production:
- without script, Delete (a document's page, its row in the list, a website source) leads to a page
  that asks first, in the product's layout; a row's Retry posts a form;
- with script, the same Delete asks in a dialog, as does Revoke on the token page;
- an htmx action that fails (the item deleted in another tab: 404; a 500; the server out of reach)
  says so in the page's message area.
Screenshots at desktop and phone widths go to test-artifacts/."""

from __future__ import annotations

import pytest

from tests.browser.conftest import (
    ARTIFACTS,
    WIDTHS,
    assert_no_sideways_scroll,
    csp_signed_in,
    seeded_server,
)

pytestmark = pytest.mark.browser

PASSWORD = "pw-olga-12345"
DOCUMENT_QUESTION = "Delete this document and its indexed chunks?"

SETUP = f"""
from ragchat.models import User
from documents.services import tag_create, tag_ensure_public
olga = User.objects.create_user("olga", password={PASSWORD!r}, first_name="Olga", last_name="Owner")
tag_ensure_public(tenant_id="default")
tag_create(tenant_id="default", name="Finance", slug="finance", owner=olga)
"""


@pytest.fixture(scope="module")
def live(tmp_path_factory, ollama_server):
    server = seeded_server(
        tmp_path_factory, ollama_server, name="ask-first", setup=SETUP, extra_env={"DJANGO_DEBUG": "false"}
    )
    yield server
    server.stop()


def _last_line(out: str) -> str:
    return out.strip().splitlines()[-1]


def _new_document(live, title: str) -> str:
    """A ready document of Olga's in Finance (stored, not indexed: the server holds the store)."""
    return _last_line(
        live.shell(
            "from documents.models import Document, Tag\nfrom documents.services import document_create\n"
            "from ragchat.models import User\n"
            f"d = document_create(user=User.objects.get(username='olga'), data={title.encode()!r} + b' rules.',\n"
            f"    filename={(title + '.txt')!r}, tags=[Tag.objects.get(slug='finance')])\n"
            "Document.objects.filter(pk=d.pk).update(status='ready', chunk_count=1)\nprint(d.pk)"
        )
    )


def _indexing_starts(live, document_id: str) -> None:
    """Its indexing starts behind the page's back (no live update: the row on the page still offers Delete)."""
    live.shell(
        "from django.utils import timezone\nfrom documents.models import Document\n"
        f"Document.objects.filter(pk={document_id!r}).update(status='processing', stage='Reading', updated_at=timezone.now())"
    )


def busy_sentence(title: str) -> str:
    return f"“{title}” is still being indexed. Wait until indexing finishes, then delete it."


def _document_exists(live, document_id: str) -> bool:
    out = live.shell(
        f"from documents.models import Document\nprint(Document.objects.filter(pk={document_id!r}).exists())"
    )
    return _last_line(out) == "True"


def _new_site(live, name: str) -> str:
    """A website source of Finance that has never crawled (its loopback address is refused anyway)."""
    return _last_line(
        live.shell(
            "from documents.models import SiteSource, Tag\n"
            f"s = SiteSource.objects.create(name={name!r}, tag=Tag.objects.get(slug='finance'),\n"
            "    start_urls=['http://127.0.0.1:9/'], allowed_domains=['127.0.0.1'])\nprint(s.pk)"
        )
    )


def _site_exists(live, site_id: str) -> bool:
    out = live.shell(
        f"from documents.models import SiteSource\nprint(SiteSource.objects.filter(pk={site_id}).exists())"
    )
    return _last_line(out) == "True"


def _answer(asked: list[str], accept: bool):
    def handle(dialog):
        asked.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    return handle


def _flash(page) -> str:
    return page.inner_text("#flash")


def _in_sight(page, selector: str) -> bool:
    """The element is on screen, below the sticky top bar (not scrolled away under it)."""
    return page.evaluate(
        """(selector) => {
          const box = document.querySelector(selector).getBoundingClientRect();
          const bar = document.querySelector('.topbar').getBoundingClientRect();
          return box.top >= bar.bottom - 1 && box.bottom <= window.innerHeight;
        }""",
        selector,
    )


# ----------------------------------------------------------------------------------- without script


@pytest.mark.parametrize("width,height", WIDTHS)
def test_deleting_a_document_without_script_asks_on_a_page(live, chromium, width, height):
    label = "desktop" if width > 600 else "phone"
    doc_id = _new_document(live, f"Expenses {label}")
    context, page, violations = csp_signed_in(chromium, width, height, live.url, "olga", PASSWORD, script=False)

    # From the document's page: Delete asks on a page of its own; Cancel goes back.
    detail_url = f"{live.url}/documents/{doc_id}/"
    page.goto(detail_url)
    with page.expect_navigation():
        page.click("main .detail-actions .btn-danger:has-text('Delete')")
    assert page.url == f"{live.url}/documents/{doc_id}/delete"
    assert page.title() == "Delete this document? · ragchat"
    assert page.locator("h1").inner_text() == "Delete this document?"
    assert f"“Expenses {label}” and its indexed chunks will be deleted" in page.inner_text("main")
    assert page.locator("header.topbar .topbar-bell").is_visible()  # the product's layout (its nav folds on phones)
    assert_no_sideways_scroll(page)
    page.screenshot(path=str(ARTIFACTS / f"document-delete-ask-{label}.png"), full_page=True)
    assert _document_exists(live, doc_id)  # asking changed nothing
    with page.expect_navigation():
        page.click("main a:has-text('Cancel')")
    assert page.url == detail_url and _document_exists(live, doc_id)

    # From its row in the list: Retry posts and comes back to the list, which says so.
    page.goto(f"{live.url}/documents/")
    assert not page.locator("#ws-state").is_visible()  # no live updates without script: no "connecting" dot
    row = page.locator(f"#doc-{doc_id}")
    row.scroll_into_view_if_needed()
    assert row.locator("button:has-text('Re-index')").is_visible() and row.locator("a:has-text('Delete')").is_visible()
    page.screenshot(path=str(ARTIFACTS / f"documents-row-no-script-{label}.png"))
    with page.expect_navigation():
        row.locator("button:has-text('Re-index')").click()
    assert page.url == f"{live.url}/documents/"
    assert "Indexing started again." in _flash(page)
    page.screenshot(path=str(ARTIFACTS / f"documents-retry-no-script-{label}.png"))
    page.wait_for_timeout(1500)  # the re-index (one line) finishes; a busy row offers no Delete
    page.reload()

    # Delete in the row asks on the page; Cancel leads back to the list; Delete deletes.
    with page.expect_navigation():
        page.locator(f"#doc-{doc_id} a:has-text('Delete')").click()
    assert page.url == f"{live.url}/documents/{doc_id}/delete?from=list"
    with page.expect_navigation():
        page.click("main a:has-text('Cancel')")
    assert page.url == f"{live.url}/documents/" and _document_exists(live, doc_id)
    with page.expect_navigation():
        page.locator(f"#doc-{doc_id} a:has-text('Delete')").click()
    with page.expect_navigation():
        page.click("main button:has-text('Delete')")
    assert page.url == f"{live.url}/documents/"
    said = _flash(page)  # (the re-index took its title from its text)
    assert f"“Expenses {label}" in said and "” and its indexed chunks were deleted." in said
    assert page.locator(f"#doc-{doc_id}").count() == 0 and not _document_exists(live, doc_id)
    page.screenshot(path=str(ARTIFACTS / f"documents-deleted-no-script-{label}.png"))
    assert not violations, violations
    context.close()


@pytest.mark.parametrize("width,height", WIDTHS)
def test_deleting_a_document_being_indexed_without_script_says_why(live, chromium, width, height):
    """The list was drawn before its indexing started: Delete asks on its page, and the delete is
    refused; the list comes back saying why, and the document is still there."""
    label = "desktop" if width > 600 else "phone"
    title = f"Busy without script {label}"
    doc_id = _new_document(live, title)
    context, page, violations = csp_signed_in(chromium, width, height, live.url, "olga", PASSWORD, script=False)
    page.goto(f"{live.url}/documents/")
    with page.expect_navigation():
        page.locator(f"#doc-{doc_id} a:has-text('Delete')").click()
    _indexing_starts(live, doc_id)
    with page.expect_navigation():
        page.click("main button:has-text('Delete')")
    assert page.url == f"{live.url}/documents/"
    status = page.locator("#flash [role=status]")
    assert status.inner_text() == busy_sentence(title) and _in_sight(page, "#flash")
    row = page.locator(f"#doc-{doc_id}")
    assert row.get_attribute("data-status") == "processing" and row.locator("a:has-text('Delete')").count() == 0
    assert _document_exists(live, doc_id)
    assert_no_sideways_scroll(page)
    page.screenshot(path=str(ARTIFACTS / f"documents-delete-busy-no-script-{label}.png"))
    assert not violations, violations
    context.close()


@pytest.mark.parametrize("width,height", WIDTHS)
def test_deleting_a_website_source_without_script_asks_on_a_page(live, chromium, width, height):
    label = "desktop" if width > 600 else "phone"
    site_id = _new_site(live, f"Help centre {label}")
    context, page, violations = csp_signed_in(chromium, width, height, live.url, "olga", PASSWORD, script=False)
    site_url = f"{live.url}/documents/sites/{site_id}/"
    page.goto(site_url)
    with page.expect_navigation():
        page.click("main .detail-actions .btn-danger:has-text('Delete')")
    assert page.url == f"{site_url}delete"
    assert page.title() == "Delete this website source? · ragchat"
    assert f"“Help centre {label}” and its 0 pages will be deleted from the index" in page.inner_text("main")
    assert_no_sideways_scroll(page)
    page.screenshot(path=str(ARTIFACTS / f"site-delete-ask-{label}.png"), full_page=True)
    assert _site_exists(live, site_id)
    with page.expect_navigation():
        page.click("main a:has-text('Cancel')")
    assert page.url == site_url and _site_exists(live, site_id)
    page.goto(f"{site_url}delete")
    with page.expect_navigation():
        page.click("main button:has-text('Delete')")
    assert page.url == f"{live.url}/documents/sites/"
    assert f"“Help centre {label}” and its 0 pages were deleted." in _flash(page)
    assert not _site_exists(live, site_id)
    assert not violations, violations
    context.close()


# ----------------------------------------------------------------------------------- with script


def test_deleting_a_document_with_script_asks_in_a_dialog(live, chromium):
    in_row, on_page = _new_document(live, "Travel in the row"), _new_document(live, "Travel on its page")
    context, page, violations = csp_signed_in(chromium, 1280, 800, live.url, "olga", PASSWORD, script=True)
    asked: list[str] = []

    # The row: a dismissed dialog changes nothing; accepted, the row goes without a page load.
    page.goto(f"{live.url}/documents/")
    page.wait_for_selector("#ws-state[data-state=open]", timeout=10_000)
    delete = page.locator(f"#doc-{in_row} a:has-text('Delete')")
    page.once("dialog", _answer(asked, False))
    delete.click()
    page.wait_for_timeout(500)  # a request, had one been sent, would be back by now
    assert asked == [DOCUMENT_QUESTION] and page.url == f"{live.url}/documents/"
    assert _document_exists(live, in_row)
    page.once("dialog", _answer(asked, True))
    delete.click()
    page.locator(f"#doc-{in_row}").wait_for(state="detached", timeout=5_000)
    assert page.url == f"{live.url}/documents/" and not _document_exists(live, in_row)

    # Its page: accepted, the browser goes to the list, which says so.
    page.goto(f"{live.url}/documents/{on_page}/")
    page.once("dialog", _answer(asked, True))
    page.click("main .detail-actions .btn-danger:has-text('Delete')")
    page.wait_for_url(f"{live.url}/documents/")
    assert asked == [DOCUMENT_QUESTION] * 3 and not _document_exists(live, on_page)
    assert "“Travel on its page” and its indexed chunks were deleted." in _flash(page)
    assert not violations, violations
    context.close()


@pytest.mark.parametrize("width,height", WIDTHS)
def test_deleting_a_document_being_indexed_from_its_row_says_why(live, chromium, width, height):
    """The row still offers Delete (drawn before indexing started); the dialog asks, the server
    refuses: the message area says why (htmx shows no refusal by itself), and the row shows the
    document as it is now, being indexed, without Delete. Nothing was deleted, and no page loaded."""
    label = "desktop" if width > 600 else "phone"
    title = f"Busy in the row {label}"
    doc_id = _new_document(live, title)
    context, page, violations = csp_signed_in(chromium, width, height, live.url, "olga", PASSWORD, script=True)
    page.goto(f"{live.url}/documents/")
    page.wait_for_selector("#ws-state[data-state=open]", timeout=10_000)
    assert page.locator("#flash").is_hidden()
    _indexing_starts(live, doc_id)
    row = page.locator(f"#doc-{doc_id}")
    assert row.get_attribute("data-status") == "ready"  # the page does not know yet
    asked: list[str] = []
    page.once("dialog", _answer(asked, True))
    with page.expect_response(lambda r: r.url.endswith("/delete")) as refused:
        row.locator("a:has-text('Delete')").click()
    assert asked == [DOCUMENT_QUESTION] and refused.value.status == 409
    status = page.locator("#flash [role=status]")
    status.wait_for(state="visible", timeout=5_000)
    assert status.inner_text() == busy_sentence(title)
    assert page.locator("#flash p").count() == 1  # the server's sentence, and no "could not be done" over it
    assert row.get_attribute("data-status") == "processing" and row.locator("a:has-text('Delete')").count() == 0
    assert "Reading" in row.inner_text()
    assert page.url == f"{live.url}/documents/" and _document_exists(live, doc_id)
    assert _in_sight(page, "#flash")
    assert_no_sideways_scroll(page)
    page.screenshot(path=str(ARTIFACTS / f"documents-delete-busy-{label}.png"))
    assert not violations, violations
    context.close()


def test_deleting_a_website_source_with_script_asks_in_a_dialog(live, chromium):
    site_id = _new_site(live, "Intranet")
    context, page, violations = csp_signed_in(chromium, 1280, 800, live.url, "olga", PASSWORD, script=True)
    page.goto(f"{live.url}/documents/sites/{site_id}/")
    asked: list[str] = []
    page.once("dialog", _answer(asked, False))
    page.click("main .detail-actions .btn-danger:has-text('Delete')")
    page.wait_for_timeout(500)
    assert asked == ["Delete this website source and all its pages from the index?"] and _site_exists(live, site_id)
    page.once("dialog", _answer(asked, True))
    page.click("main .detail-actions .btn-danger:has-text('Delete')")
    page.wait_for_url(f"{live.url}/documents/sites/")
    assert "“Intranet” and its 0 pages were deleted." in _flash(page) and not _site_exists(live, site_id)
    assert not violations, violations
    context.close()


def test_revoking_a_token_asks_first(live, chromium):
    live.shell(
        "from api.services import token_create\nfrom ragchat.models import User\n"
        "token_create(user=User.objects.get(username='olga'), name='Build bot', scopes=['read'], expires_in_days=30)"
    )
    context, page, violations = csp_signed_in(chromium, 1280, 800, live.url, "olga", PASSWORD, script=True)
    page.goto(f"{live.url}/api/tokens/")
    revoke = page.locator("tr", has_text="Build bot").locator("button:has-text('Revoke')")
    asked: list[str] = []
    page.once("dialog", _answer(asked, False))
    revoke.click()
    page.wait_for_timeout(500)
    assert asked == ["Revoke “Build bot”? Calls with it are refused from then on."]
    assert page.locator("tr", has_text="Build bot").locator(".pill-ok:has-text('Active')").count() == 1
    page.once("dialog", _answer(asked, True))
    with page.expect_navigation():
        revoke.click()
    assert len(asked) == 2
    assert page.locator("tr", has_text="Build bot").locator(".pill-danger:has-text('Revoked')").count() == 1
    assert not violations, violations
    context.close()


# ----------------------------------------------------------------------------------- htmx failures


@pytest.mark.parametrize("width,height", WIDTHS)
def test_an_htmx_action_that_fails_says_so(live, chromium, width, height):
    """A document deleted in another tab, then deleted again here (404); a server error (500); the
    server out of reach: each says so in the message area, one sentence at a time, as an alert."""
    label = "desktop" if width > 600 else "phone"
    doc_id = _new_document(live, f"Parking {label}")
    context, page, violations = csp_signed_in(chromium, width, height, live.url, "olga", PASSWORD, script=True)
    detail_url = f"{live.url}/documents/{doc_id}/"
    page.goto(detail_url)
    assert page.locator("#flash").is_hidden()

    asked: list[str] = []  # every Delete asks first
    other = context.new_page()  # another tab deletes it
    other.goto(detail_url)
    other.once("dialog", _answer(asked, True))
    other.click("main .detail-actions .btn-danger:has-text('Delete')")
    other.wait_for_url(f"{live.url}/documents/")
    other.close()
    assert not _document_exists(live, doc_id)

    page.once("dialog", _answer(asked, True))
    with page.expect_response(lambda r: r.url.endswith("/delete")) as gone:
        page.click("main .detail-actions .btn-danger:has-text('Delete')")
    assert gone.value.status == 404
    alert = page.locator("#flash .flash-error[role=alert]")
    alert.wait_for(state="visible", timeout=5_000)
    assert alert.inner_text() == (
        "That is no longer there: it was deleted, perhaps in another tab, or is not available to you. "
        "Reload the page to see what is there now."
    )
    assert alert.locator("a").get_attribute("href") == f"/documents/{doc_id}/"
    assert page.url == detail_url and _in_sight(page, "#flash")
    assert_no_sideways_scroll(page)
    page.screenshot(path=str(ARTIFACTS / f"htmx-failure-404-{label}.png"))

    # A server error, then the server out of reach: each replaces the last sentence.
    chromium.allow("Response Status Error Code 500", why="the test answers the request with a server error")
    for cut_off in ("htmx:sendError", "htmx:afterRequest"):
        chromium.allow(cut_off, why="the test cuts the request off as an unreachable server would")
    page.route("**/delete", lambda route: route.fulfill(status=500, body="Server Error"))
    page.once("dialog", _answer(asked, True))
    page.click("main .detail-actions .btn-danger:has-text('Delete')")
    page.wait_for_selector("#flash [role=alert]:has-text('Something went wrong on the server')", timeout=5_000)
    assert alert.count() == 1
    assert alert.inner_text() == (
        "Something went wrong on the server. Try again in a moment; if it keeps happening, tell your administrator."
    )
    assert _in_sight(page, "#flash")
    page.screenshot(path=str(ARTIFACTS / f"htmx-failure-500-{label}.png"))
    page.unroute("**/delete")
    page.route("**/delete", lambda route: route.abort("connectionrefused"))
    page.once("dialog", _answer(asked, True))
    page.click("main .detail-actions .btn-danger:has-text('Delete')")
    page.wait_for_selector("#flash [role=alert]:has-text('could not be reached')", timeout=5_000)
    assert alert.count() == 1
    assert alert.inner_text() == "The server could not be reached. Check your connection and try again."
    assert _in_sight(page, "#flash")
    page.screenshot(path=str(ARTIFACTS / f"htmx-failure-network-{label}.png"))
    assert page.url == detail_url
    assert asked == [DOCUMENT_QUESTION] * 4
    assert not violations, violations
    context.close()
