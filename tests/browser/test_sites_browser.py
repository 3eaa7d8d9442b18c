"""Website import in a real browser: a tag owner adds a site (served by a real local HTTP server),
watches the crawl's counts arrive live on the source's page without a reload, and finds the pages
in the documents list with their source, next to a synced folder's files and a scanned PDF read by
OCR. Screenshots at 1280x800 and 390x844: test-artifacts/sites-*.png, documents-sources-*.png."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import ARTIFACTS, WIDTHS, assert_no_sideways_scroll, seeded_server, sign_in
from tests.documents.fixture_site import FixtureSite

pytestmark = pytest.mark.browser

PASSWORD = "sites-pass-123"

SETUP = """
import tempfile, pathlib
from django.core.management import call_command
from ragchat.models import User
from documents.services import tag_create
from ragchat.evaluation import docgen
owner = User.objects.create_user("hana", password=PASSWORD_VALUE, first_name="Hana", last_name="Help")
User.objects.create_superuser("root", password=PASSWORD_VALUE)
tag_create(tenant_id="default", name="Help centre", slug="help", owner=owner)
folder = pathlib.Path(tempfile.mkdtemp()) / "contracts"
folder.mkdir()
(folder / "supply-contract-scan.pdf").write_bytes(docgen.make_image_pdf([
    "Supply contract 4711 between Brightwater Tools and Northwind Supplies.",
    "Either party may end this contract with three months notice in writing."]))
(folder / "canteen.txt").write_text("The canteen opens at 11:30 on weekdays.")
call_command("sync_folder", str(folder), "--tag", "help", "--user", "hana", verbosity=0)
""".replace("PASSWORD_VALUE", repr(PASSWORD))


@pytest.fixture(scope="module")
def fixture_site():
    site = FixtureSite().start()
    site.slow_seconds = 1.5
    yield site
    site.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory, ollama_server):
    env = {
        "RAGCHAT_CRAWL_ALLOW_PRIVATE": "true",
        "RAGCHAT_CRAWL_DELAY_SECONDS": "0.05",
        "RAGCHAT_CRAWL_TIMEOUT_SECONDS": "1",
        "RAGCHAT_CRAWL_MAX_PAGE_BYTES": "200000",
        "RAGCHAT_SCHEDULE_MINUTES": "0",
    }
    server = seeded_server(tmp_path_factory, ollama_server, name="sites-server", setup=SETUP, extra_env=env)
    yield server
    server.stop()


def _shoot(page, name: str) -> None:
    for width, height in ((1280, 800), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.screenshot(path=str(ARTIFACTS / f"{name}-{width}.png"), full_page=False)
    page.set_viewport_size({"width": 1280, "height": 800})


def test_owner_adds_a_site_and_watches_the_crawl_live(server, fixture_site, browser_page):
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser_page
    frames: list[str] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(str(payload))))
    sign_in(page, server.url, "hana", PASSWORD)
    page.goto(server.url + "/documents/sites/")
    assert "No websites yet" in page.content()
    page.fill("#id_name", "Brightwater help centre")
    page.select_option("#id_tag", label="Help centre")
    page.fill("#id_start_urls", fixture_site.url("/"))
    page.fill("#id_allowed_domains", "localhost")
    page.fill("#id_max_pages", "20")
    page.click("button:has-text('Add and crawl')")
    page.wait_for_url(re.compile(r".*/documents/sites/\d+/$"))
    page.wait_for_selector(".site-progress .pill-ok", timeout=60_000)  # live: no reload
    progress = page.inner_text(".site-progress")
    assert "4 pages" in progress and "4 new" in progress, progress
    assert any("site-progress" in f and "crawling" in f for f in frames), "no live progress frame"
    page.reload()
    body = page.inner_text("main")
    assert "disallowed by robots.txt" in body and "the server answered 404" in body
    assert "not an HTML page (application/pdf)" in body and "redirect loop" in body
    _shoot(page, "sites-detail")
    page.goto(server.url + "/documents/sites/")
    _shoot(page, "sites-list")
    page.goto(server.url + "/documents/")
    rows = page.inner_text("#document-rows")
    assert fixture_site.url("/docs") in rows and "supply-contract-scan.pdf" in rows and "OCR p. 1, 2" in rows
    _shoot(page, "documents-sources")


@pytest.mark.parametrize(
    "view",
    [
        {"viewport": {"width": 1280, "height": 800}, "color_scheme": "light"},
        {"viewport": {"width": 1280, "height": 800}, "color_scheme": "dark"},
        {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True},
    ],
    ids=["desktop-light", "desktop-dark", "phone"],
)
def test_sites_pages_pass_axe(server, chromium, view):
    """The accessibility check of tests/browser/test_axe_browser.py over the website pages."""
    from tests.browser.test_axe_browser import AXE, axe_problems

    assert AXE, "axe-core is missing: run `make axe` (make test does)"
    site_id = server.shell("from documents.models import SiteSource; print(SiteSource.objects.get().pk)").split()[-1]
    context = chromium.new_context(**view)
    page = context.new_page()
    sign_in(page, server.url, "hana", PASSWORD)
    problems = {}
    for path in ("/documents/sites/", f"/documents/sites/{site_id}/", "/documents/?source=web"):
        assert page.goto(server.url + path).status == 200
        found = axe_problems(page, AXE[-1].read_text())
        if found:
            problems[path] = found
    context.close()
    assert not problems, problems


def test_a_member_cannot_open_the_sites_pages(server, browser_page):
    server.create_user("mo", PASSWORD)
    sign_in(browser_page, server.url, "mo", PASSWORD)
    response = browser_page.goto(server.url + "/documents/sites/")
    assert response.status == 404


@pytest.mark.parametrize("width,height", WIDTHS)
def test_a_site_that_cannot_be_reached_says_so_once_and_in_words(server, chromium, width, height):
    """No "failed Failed", no green "the first crawl has started" above a crawl that has failed, the
    network's failure as a sentence (not "[Errno -2] Name or service not known"), and the crawl's
    time written as every date of the app is ("27 Nov 2026, 13:02")."""
    context = chromium.new_context(viewport={"width": width, "height": height}, is_mobile=width < 600)
    page = context.new_page()
    sign_in(page, server.url, "hana", PASSWORD)
    page.goto(server.url + "/documents/sites/")
    page.fill("#id_name", f"Old help centre {width}")
    page.select_option("#id_tag", label="Help centre")
    page.fill("#id_start_urls", "http://no-such-host.invalid/")
    page.fill("#id_allowed_domains", "no-such-host.invalid")
    page.click("button:has-text('Add and crawl')")
    page.wait_for_url(re.compile(r".*/documents/sites/\d+/$"))
    flash = page.inner_text("#flash")
    assert f"“Old help centre {width}” added" in flash and "started" not in flash, flash
    page.wait_for_selector(".site-progress .pill-danger", timeout=30_000)
    page.reload()
    assert page.inner_text(".site-progress p").strip() == "failed"  # the label once, the reason below
    main = page.inner_text("main")
    assert "No page could be taken from this site" in main
    assert "robots.txt could not be read (" in main and "no-such-host.invalid" in main
    assert "Errno" not in main and "gaierror" not in main, main
    started = page.inner_text("main table:has(th:has-text('Started')) tbody tr td >> nth=0").strip()
    assert re.fullmatch(r"\d{1,2} [A-Z][a-z]{2} \d{4}, \d{2}:\d{2}", started), started
    assert "a.m." not in main and "p.m." not in main
    assert_no_sideways_scroll(page)
    page.screenshot(path=str(ARTIFACTS / f"sites-unreachable-{width}.png"), full_page=True)
    context.close()
