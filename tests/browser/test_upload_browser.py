"""Upload two files with tags in a real browser and watch them reach `ready` with chunk counts, live
(websocket pushes, no reload). Screenshot: test-artifacts/documents-upload.png."""

from __future__ import annotations

import re

import pytest

from ragchat.evaluation.docgen import lorem_sentences, make_docx, make_pdf
from tests.browser.conftest import ARTIFACTS, sign_in, wait_until

pytestmark = pytest.mark.browser

PASSWORD = "upload-pass-123"


@pytest.fixture(scope="module")
def uploader(daphne_server):
    daphne_server.create_user("uma", PASSWORD, first_name="Uma", last_name="Uploader")
    daphne_server.create_user("rita", PASSWORD, first_name="Rita", last_name="Reader")
    daphne_server.create_tag("finance", "Finance", owner="uma", members=("rita",))
    daphne_server.create_tag("legal", "Legal", owner="uma")
    return "uma"


def _rows(frame: str) -> list[dict]:
    """The document rows an HTML frame of the live feed carries (out-of-band <tr> fragments)."""
    return [
        {"id": m.group(1), "status": m.group(2)}
        for m in re.finditer(r'<tr id="(doc-[^"]+)" class="doc-row" data-status="(\w+)"', frame)
    ]


def test_upload_two_files_and_watch_them_become_ready(live_server_url, uploader, browser_page):
    page = browser_page
    frames: list[dict] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.extend(_rows(payload))))
    sign_in(page, live_server_url, uploader, PASSWORD)
    page.goto(live_server_url + "/documents/")
    page.wait_for_selector("#ws-state[data-state=open]", timeout=10_000)
    page.evaluate("window.__noReload = true")

    pdf = make_pdf([" ".join(lorem_sentences(60, seed=s)) for s in range(4)], title="Quarterly budget")
    docx = make_docx(
        [("Contracts", lorem_sentences(40, seed=9)), ("Renewals", lorem_sentences(40, seed=10))], title="Contract guide"
    )
    page.set_input_files(
        "#id_files",
        [
            {"name": "budget.pdf", "mimeType": "application/pdf", "buffer": pdf},
            {"name": "contracts.docx", "mimeType": "application/octet-stream", "buffer": docx},
        ],
    )
    page.check("input[name=tags] >> nth=0")  # first tag in the picker (Finance, by name)
    page.check("input[name=tags] >> nth=1")
    assert page.locator("input[name=tags]").count() == 2, "only the tags the uploader owns are offered"
    page.click("#upload-form button[type=submit]")

    page.wait_for_selector("#upload-result .upload-ok", timeout=15_000)
    wait_until(
        page, "document.querySelectorAll('#document-rows tr.doc-row[data-status=ready]').length === 2", timeout=30
    )
    assert page.evaluate("window.__noReload") is True, "the rows changed without a page reload"
    rows = page.locator("#document-rows tr.doc-row")
    assert rows.count() == 2
    for index in range(2):
        chunks = rows.nth(index).locator(".doc-chunks").inner_text().strip()
        assert chunks.isdigit() and int(chunks) > 0
    titles = page.locator("#document-rows .doc-title").all_inner_texts()
    assert sorted(titles) == ["Contract guide", "Quarterly budget"]
    ready_frames = {f["id"] for f in frames if f.get("status") == "ready"}
    assert len(ready_frames) == 2, f"both rows became ready through websocket pushes: {frames}"
    assert any(f.get("status") == "processing" for f in frames), "progress was pushed while indexing"
    assert page.locator("#facets [data-tag=finance] .facet-count").inner_text() == "2"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "documents-upload.png"), full_page=True)
