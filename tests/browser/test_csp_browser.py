"""The Content-Security-Policy in a real browser: every page renders and runs with no violation
(no inline script or style, nothing from another origin), for the people who see each page; and the
owner's question page and the admins' "view as" page, at desktop and phone widths (screenshots in
test-artifacts/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.conftest import LiveServer, csp_context, sign_in

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"

SETUP = r"""
import json
from ragchat.models import User
from tests.access.conftest import build_world
from documents.models import SiteSource
w = build_world(User)
site_b = SiteSource.objects.create(name="Beta help centre", tag=w.tags["beta"],
                                   start_urls=["http://127.0.0.1:9/"], allowed_domains=["127.0.0.1"])
print(json.dumps({"s1": str(w.sessions["s1"].pk), "rq_b": w.questions["rq_b"].pk,
                  "doc_a": str(w.docs["doc_a"].pk), "doc_b": str(w.docs["doc_b"].pk), "site_b": site_b.pk}))
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory, ollama_server):
    # Seeded before it starts (seeded_server would start it, and a second start() orphaned a daphne).
    server = LiveServer(data_dir=tmp_path_factory.mktemp("csp"), ollama_url=ollama_server.url)
    server.manage("migrate", "-v0")
    ids = __import__("json").loads(server.shell(SETUP).strip().splitlines()[-1])
    server.start()
    yield server, ids
    server.stop()


def _page(chromium, width=1280, height=900):
    """A page under the app's CSP and what its pages report (tests/browser/conftest.py's watch)."""
    context, violations = csp_context(chromium, width, height)
    return context, context.new_page(), violations


PAGES = {
    "emma": (
        "pw-emma-12345",
        [
            "/",
            "/chat/{s1}/",
            "/chat/{s1}/delete/",
            "/documents/",
            "/documents/{doc_a}/",
            "/routing/mine/",
            "/routing/whats-new/",
        ],
    ),
    "fiona": (
        "pw-fiona-12345",
        [
            "/routing/inbox/",
            "/routing/q/{rq_b}/",
            "/routing/whats-new/",
            "/routing/notifications/",
            # the pages that ask first (without script)
            "/documents/{doc_b}/delete",
            "/documents/sites/{site_b}/delete",
        ],
    ),
    "root": (
        "pw-root-12345",
        [
            "/routing/inbox/",
            "/routing/q/{rq_b}/",
            "/access/view-as/",
            "/access/audit/",
            "/admin/",
            "/admin/documents/document/",
        ],
    ),
}


@pytest.mark.parametrize("username", sorted(PAGES))
def test_pages_have_no_csp_violation(server, chromium, username):
    live, ids = server
    password, paths = PAGES[username]
    context, page, violations = _page(chromium)
    page.goto(live.url + "/accounts/login/")
    sign_in(page, live.url, username, password)
    for path in paths:
        response = page.goto(live.url + path.format(**ids))
        assert response.status == 200, path
        assert "default-src 'self'" in response.headers.get("content-security-policy", "")
        page.wait_for_load_state("networkidle")
        assert not violations, f"{path}: {violations}"
    context.close()


@pytest.mark.parametrize("width,height,label", [(1280, 800, "desktop"), (390, 844, "phone")])
def test_owner_sees_what_is_withheld_and_admin_views_as(server, chromium, width, height, label):
    live, ids = server
    ARTIFACTS.mkdir(exist_ok=True)
    context, page, violations = _page(chromium, width, height)
    sign_in(page, live.url, "fiona", "pw-fiona-12345")
    page.goto(live.url + f"/routing/q/{ids['rq_b']}/")
    text = page.inner_text("main")
    assert "MKalpha7Q" not in page.content()  # leak 1 of the issue: the IT passage, draft and answer
    assert "1 source you do not have access to is not shown" in text
    assert "The draft is withheld" in text
    assert "Withheld: it drew on documents you may not read" in text
    assert page.is_visible("#answer-form")  # the owner can still answer
    page.screenshot(path=str(ARTIFACTS / f"access-owner-question-{label}.png"), full_page=True)
    context.close()

    context, page, violations = _page(chromium, width, height)
    sign_in(page, live.url, "root", "pw-root-12345")
    page.goto(live.url + "/access/view-as/")
    page.select_option("#id_user", label="Mia (mia)")
    page.fill("#id_question", "What is the policy?")
    page.click("form.viewas-form button[type=submit]")
    page.wait_for_selector("#returned-title")
    assert "Mia would get" in page.inner_text("main")
    page.screenshot(path=str(ARTIFACTS / f"access-view-as-{label}.png"), full_page=True)
    assert not violations, violations
    context.close()


def test_the_watch_sees_a_csp_violation_and_an_htmx_error(server, chromium):
    """The rule every browser test runs under (tests/browser/conftest.py): a style the CSP refuses and
    an out-of-band swap with no target on the page are both seen (and would fail the test at its end:
    here they are brought about on purpose and allowed)."""
    live, _ = server
    context, page, problems = _page(chromium)
    sign_in(page, live.url, "emma", "pw-emma-12345")
    assert problems == []
    page.evaluate("document.querySelector('main').setAttribute('style', 'color: red')")
    page.evaluate(
        "htmx.swap('#flash', '<p id=\"nowhere-on-this-page\" hx-swap-oob=\"true\">x</p>', {swapStyle: 'beforeend'})"
    )
    page.wait_for_timeout(200)
    assert any(p.startswith("CSP violation: style-src-attr") for p in problems), problems
    assert any("htmx:oobErrorNoTarget" in p and "nowhere-on-this-page" in p for p in problems), problems
    problems.clear()  # seen: the test does not fail on them
    # What a test allows (it brings it about on purpose) is not counted.
    chromium.allow("htmx:oobErrorNoTarget", why="this test swaps a fragment whose target is not on the page")
    page.evaluate(
        "htmx.swap('#flash', '<p id=\"nowhere-either\" hx-swap-oob=\"true\">x</p>', {swapStyle: 'beforeend'})"
    )
    page.wait_for_timeout(200)
    assert chromium.problems() == [] and any("nowhere-either" in line for line in chromium.console())
    context.close()
