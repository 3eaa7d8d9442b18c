"""The documents pages at desktop and phone widths (issue 14): a multi-file upload with one empty
file uploads the others and says which one it refused; errors say what to do, not field names; on
phones every row is a card with its actions on screen; a document's page shows its status once and
lets its manager rename it by keyboard. Real daphne, Debian's Chromium."""

from __future__ import annotations

import pytest

from ragchat.evaluation.docgen import make_text
from tests.browser.conftest import ARTIFACTS, sign_in

pytestmark = pytest.mark.browser

PASSWORD = "docs-ux-pass-123"
WIDTHS = [pytest.param((1280, 800), id="desktop"), pytest.param((390, 844), id="phone")]


@pytest.fixture(scope="module")
def manager(daphne_server):
    daphne_server.create_user("dora", PASSWORD, first_name="Dora", last_name="Docs")
    daphne_server.create_tag("handbook", "Handbook", owner="dora")
    return "dora"


def _page(chromium, size):
    width, height = size
    context = chromium.new_context(viewport={"width": width, "height": height}, is_mobile=width < 500)
    return context, context.new_page()


def _no_sideways_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")


@pytest.mark.parametrize("size", WIDTHS)
def test_upload_rows_detail_and_rename(live_server_url, manager, chromium, size):
    context, page = _page(chromium, size)
    try:
        sign_in(page, live_server_url, manager, PASSWORD)
        page.goto(live_server_url + "/documents/")
        page.wait_for_selector("#ws-state[data-state=open]", timeout=10_000)
        # No tag chosen: the message says what to do, with no raw field name.
        page.set_input_files("#id_files", [{"name": "a.txt", "mimeType": "text/plain", "buffer": b"Some text."}])
        page.click("#upload-form button[type=submit]")
        page.wait_for_selector("#upload-result :text('Choose at least one tag')", timeout=10_000)
        assert "tags:" not in page.inner_text("#upload-result")
        # One empty file among good ones: the good ones upload, the empty one is named.
        name = f"travel-{size[0]}.txt"
        page.set_input_files(
            "#id_files",
            [
                {"name": "empty.txt", "mimeType": "text/plain", "buffer": b""},
                {"name": name, "mimeType": "text/plain", "buffer": make_text([f"Travel rules {size[0]}: trains."])},
            ],
        )
        page.check("input[name=tags] >> nth=0")
        page.click("#upload-form button[type=submit]")
        page.wait_for_selector("#upload-result :text('empty.txt: this file is empty.')", timeout=10_000)
        row = page.wait_for_selector(f"#document-rows tr.doc-row:has-text('{name}')", timeout=10_000)
        page.wait_for_selector(f"#document-rows tr.doc-row[data-status=ready]:has-text('{name}')", timeout=30_000)
        # Every action of every row is on screen, and the page does not scroll sideways.
        assert _no_sideways_scroll(page)
        # Measured in one script: a live row update can replace a row between two locator calls.
        boxes = page.evaluate(
            "[...document.querySelectorAll('#document-rows .row-actions .btn')]"
            ".map(b => { const r = b.getBoundingClientRect(); return [b.innerText, r.x, r.width]; })"
        )
        assert boxes
        for text, x, width in boxes:
            assert x >= 0 and x + width <= size[0] + 1, text
        page.screenshot(path=str(ARTIFACTS / f"documents-list-{size[0]}.png"), full_page=True)

        # The document's page: the status once, then rename by keyboard.
        page.locator(f"#document-rows tr.doc-row:has-text('{name}') a.doc-title").click()
        page.wait_for_selector(".doc-detail h1")
        assert page.locator(".doc-detail").inner_text().count("Ready") == 1
        assert _no_sideways_scroll(page)
        page.screenshot(path=str(ARTIFACTS / f"documents-detail-{size[0]}.png"), full_page=True)
        page.locator(".doc-rename summary").focus()
        page.keyboard.press("Enter")
        page.locator("#id_title").fill(f"Travel policy {size[0]}")
        page.keyboard.press("Enter")
        page.wait_for_selector(f".flash :text('Renamed to “Travel policy {size[0]}”')", timeout=10_000)
        assert page.inner_text(".doc-detail h1") == f"Travel policy {size[0]}"
        page.goto(live_server_url + "/documents/")
        page.wait_for_selector(f"#document-rows .doc-title:has-text('Travel policy {size[0]}')")
        assert row is not None
    finally:
        context.close()
