"""A citation opens at its passage, highlighted and in view (issue 37): a chat with the fake model
cites a PDF, a scanned PDF, a DOCX, a Markdown file and a web page, each indexed through the real
pipeline (parser, OCR, chunker, hashing embedder, embedded Qdrant); at desktop and phone width the
card's "Open passage" leads to the viewer, where the marked passage is inside the window; the live
page's link is there for the web page; no CSP violation; axe finds nothing serious; an admin sees
the chunks as indexed. Screenshots go to test-artifacts/viewer-*.png."""

from __future__ import annotations

import json

import pytest

from tests.browser.conftest import (
    ARTIFACTS,
    LiveServer,
    assert_no_sideways_scroll,
    sign_in,
    wait_for_answer,
    wait_until,
)
from tests.browser.test_axe_browser import AXE, axe_problems

pytestmark = pytest.mark.browser

PASSWORD = "pw-vera-12345"
WEB_URL = "https://intranet.example.com/travel/allowances"
SETUP = r"""
import json
from asgiref.sync import async_to_sync
from documents import services
from documents.viewer import document_chunks
from ragchat import runtime
from ragchat.evaluation.docgen import lorem_sentences, make_docx, make_html, make_image_pdf, make_markdown, make_pdf
from ragchat.models import User
User.objects.create_user(username="vera", password=%(pw)r, first_name="Vera", last_name="Lind")
root = User.objects.create_superuser(username="root", password=%(pw)r, email="root@example.com")
public = services.tag_ensure_public(tenant_id="default")
fill = lambda seed, n: " ".join(lorem_sentences(n, seed=seed))
key = "The zephyr allowance for {} is {} euros per day."
files = {
    "pdf": (make_pdf([fill(1, 45), fill(2, 30) + " " + key.format("printed reports", 41) + " " + fill(3, 12), fill(4, 40)],
                     title="Budget 2026"), "budget-2026.pdf", None),
    "scan": (make_image_pdf([
        "Supply contract 4711 between Brightwater Tools Ltd and Northwind Supplies.\n"
        "The supplier delivers 250 drill sets each month at 18.40 euros per set.\n"
        "Payment is due within 30 days of the invoice date.\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n"
        "Annex B: the zephyr allowance for site visits is 35 euros per day, paid with the invoice."]),
        "signed-contract.pdf", None),
    "docx": (make_docx([("Purpose", [fill(5, 25)]), ("Meals", [fill(6, 20)]),
                        ("Allowances", [key.format("meals abroad", 52) + " " + fill(7, 6)]), ("Receipts", [fill(8, 25)])],
                       title="Travel policy"), "travel-policy.docx", None),
    "md": (make_markdown([("Welcome", [fill(9, 25)]), ("Equipment", [fill(10, 20)]),
                          ("Home office", [key.format("home office days", 3) + " " + fill(11, 5)]),
                          ("Support", [fill(12, 25)])], title="Employee handbook"), "handbook.md", None),
    "web": (make_html([("Overview", [fill(13, 25)]), ("Per diem", [key.format("conference trips", 60)]),
                       ("Questions", [fill(14, 20)])], title="Travel allowances"), "travel-allowances.html",
            {"source_kind": "web", "source_url": %(web)r}),
}
out = {}
for kind, (data, name, source) in files.items():
    d = services.document_create(user=root, data=data, filename=name, tags=[public], check_permissions=False,
                                 source=source)
    services.document_ingest_sync(d.id)
    d.refresh_from_db()
    assert d.status == "ready", (kind, d.error)
    chunk = next(c for c in document_chunks(document=d) if "zephyr" in c.chunk_text.lower())
    out[kind] = {"id": str(d.id), "chunk": chunk.chunk_index, "page": chunk.page_number}
runtime.reset()
print(json.dumps(out))
"""
SIZES = [(1280, 800), (390, 844)]


@pytest.fixture(scope="module")
def server(tmp_path_factory, ollama_server):
    live = LiveServer(data_dir=tmp_path_factory.mktemp("viewer"), ollama_url=ollama_server.url)
    live.manage("migrate", "-v0")
    docs = json.loads(live.shell(SETUP % {"pw": PASSWORD, "web": WEB_URL}).strip().splitlines()[-1])
    live.start()
    yield live, docs
    live.stop()


def _in_view(page, selector: str) -> dict:
    """The element's box, asserted inside the window (after the viewer's scroll has settled)."""
    element = page.locator(selector).first
    element.wait_for(state="attached")
    wait_until(page, "document.readyState === 'complete'")
    box = element.bounding_box()
    height = page.viewport_size["height"]
    # Below the top bar (it stays at the top of the window while the page scrolls), above the bottom.
    bar = page.locator("header.topbar").bounding_box()
    assert box is not None, selector
    top = max(0, bar["y"] + bar["height"]) if bar else 0
    assert box["y"] >= top and box["y"] + box["height"] <= height, f"{selector} out of view: {box}, {top}-{height} px"
    return box


def test_citations_open_at_the_highlighted_passage(server, chromium, fake_ollama):
    live, docs = server
    order = ["pdf", "scan", "docx", "md", "web"]
    fake_ollama.reply(
        " ".join(
            f"The {kind} says the zephyr allowance differs [SourceId: {docs[kind]['id']}:{docs[kind]['chunk']}]."
            for kind in order
        )
    )
    ARTIFACTS.mkdir(exist_ok=True)
    for width, height in SIZES:
        phone = width < 600
        context = chromium.new_context(viewport={"width": width, "height": height}, is_mobile=phone, has_touch=phone)
        page = context.new_page()
        sign_in(page, live.url, "vera", PASSWORD)
        page.fill("#question", "What is the zephyr allowance per day?")
        page.keyboard.press("Enter")
        wait_for_answer(page)
        links = page.locator("article.status-complete .cite-open[href*='/view?chunk=']")
        hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
        for kind in order:
            assert any(docs[kind]["id"] in h for h in hrefs), f"no citation of the {kind}: {hrefs}"
        # The first card opened as a reader would: tap (phone) or keyboard focus, then its link.
        marker = page.locator("article.status-complete .cite-marker").first
        if phone:
            marker.tap()
        else:
            marker.focus()
        page.locator("article.status-complete .cite-card").first.locator(".cite-open").first.click()
        page.wait_for_url("**/view?chunk=*")
        for kind in order:
            url = next(h for h in hrefs if docs[kind]["id"] in h)
            if docs[kind]["id"] not in page.url:
                page.goto(live.url + url)
            if kind in ("pdf", "scan"):
                page.locator(".pdf-hit").first.wait_for()
                page.locator(".pdf-page img").evaluate("img => img.decode()")
                _in_view(page, ".pdf-hit")
                assert f"Page {docs[kind]['page']} of" in page.inner_text(".pager")
            else:
                _in_view(page, "#passage mark")
            assert page.locator("#passage").count() == 1
            if kind == "web":
                assert page.locator(f"a[href='{WEB_URL}']").count() >= 1
                page.screenshot(path=str(ARTIFACTS / f"viewer-web-whole-{width}.png"), full_page=True)
            assert_no_sideways_scroll(page)
            page.screenshot(path=str(ARTIFACTS / f"viewer-{kind}-{width}.png"))
        # Another page of the PDF, and back to the cited one.
        page.goto(live.url + next(h for h in hrefs if docs["pdf"]["id"] in h))
        page.click("a[rel=next]")
        page.wait_for_url("**page=*")
        assert page.locator(".pdf-hit").count() == 0
        page.click("a[rel=prev]")
        page.locator(".pdf-hit").first.wait_for()
        context.close()


def test_viewer_axe_and_the_chunks_as_indexed(server, chromium):
    live, docs = server
    assert AXE, "axe-core is missing: run `make axe`"
    axe_source = AXE[-1].read_text()
    problems = {}
    for width, height in SIZES:
        context = chromium.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        sign_in(page, live.url, "root", PASSWORD)
        for kind in ("pdf", "md"):
            page.goto(f"{live.url}/documents/{docs[kind]['id']}/view?chunk={docs[kind]['chunk']}#passage")
            page.wait_for_load_state("networkidle")
            problems[f"{kind}-{width}"] = axe_problems(page, axe_source)
        page.goto(f"{live.url}/documents/{docs['docx']['id']}/view?chunk={docs['docx']['chunk']}&show=chunks")
        assert page.locator(".indexed-chunk").count() >= 3
        assert f"{docs['docx']['id']}:{docs['docx']['chunk']}" in page.inner_text(".indexed-chunk.is-cited")
        problems[f"chunks-{width}"] = axe_problems(page, axe_source)
        assert_no_sideways_scroll(page)
        page.screenshot(path=str(ARTIFACTS / f"viewer-chunks-{width}.png"), full_page=False)
        context.close()
    assert not any(problems.values()), json.dumps(problems, indent=1)
