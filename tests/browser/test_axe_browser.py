"""Accessibility: axe-core (the npm registry's axe-core, fetched by `make axe`, not committed) runs
over every page, for the people who see each page, in the light and the dark theme and at phone
width; no serious or critical violation may remain. Debian's Chromium, real daphne."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser.conftest import LiveServer
from tests.browser.test_csp_browser import SETUP

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
AXE = sorted(ROOT.glob(".cache/axe-core-*/axe.min.js"))

# Every page a person reaches, by who sees it ({…} filled from the seeded world).
PAGES = {
    None: ("", ["/accounts/login/"]),
    "emma": (
        "pw-emma-12345",
        [
            "/",
            "/chat/{s1}/",
            "/chat/{s1}/delete/",  # the page that asks first (without script)
            "/chat/search/?q=password",
            "/chat/archived/",
            "/documents/",
            "/documents/{doc_a}/",
            "/routing/mine/",
            "/api/tokens/",
            "/routing/whats-new/",
            "/routing/notifications/",
        ],
    ),
    "fiona": (
        "pw-fiona-12345",
        [
            "/documents/",
            "/documents/{doc_b}/delete",  # the page that asks first (without script)
            "/documents/sites/",
            "/documents/sites/{site_b}/",
            "/documents/sites/{site_b}/delete",  # the page that asks first (without script)
            "/routing/inbox/",
            "/routing/q/{rq_b}/",
            "/routing/whats-new/",
            "/routing/notifications/",
        ],
    ),
    "root": (
        "pw-root-12345",
        ["/routing/inbox/", "/routing/q/{rq_b}/", "/access/view-as/", "/access/audit/", "/api/tokens/all/"],
    ),
}
VIEWS = [
    pytest.param({"viewport": {"width": 1280, "height": 800}, "color_scheme": "light"}, id="desktop-light"),
    pytest.param({"viewport": {"width": 1280, "height": 800}, "color_scheme": "dark"}, id="desktop-dark"),
    pytest.param({"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}, id="phone"),
]


# Votes on s1's answers through the real service: a down vote with a reason (a review item, which
# the admin opens) and one still without a reason (its reason form shows open in the chat).
FEEDBACK = r"""
import json
from chat.models import Message
from ragchat.models import User
from routing.services import feedback_vote
emma = User.objects.get(username="emma")
a1, a2 = Message.objects.filter(session_id=%(s1)r, role="assistant").order_by("id")[:2]
feedback_vote(user=emma, message=a1, vote=-1, reason="outdated", comment="This changed last month.")
feedback_vote(user=emma, message=a2, vote=-1)
from routing.models import RoutedQuestion
print(json.dumps({"rv": RoutedQuestion.objects.get(origin="feedback").pk}))
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory, ollama_server):
    # Seeded before it starts (seeded_server would start it, and a second start() orphaned a daphne).
    server = LiveServer(data_dir=tmp_path_factory.mktemp("axe"), ollama_url=ollama_server.url)
    server.manage("migrate", "-v0")
    ids = json.loads(server.shell(SETUP).strip().splitlines()[-1])
    ids.update(json.loads(server.shell(FEEDBACK % ids).strip().splitlines()[-1]))
    server.start()
    yield server, ids
    server.stop()


@pytest.fixture(scope="module")
def axe_source() -> str:
    assert AXE, "axe-core is missing: run `make axe` (make test does)"
    return AXE[-1].read_text()


def axe_problems(page, axe_source: str) -> list[str]:
    """Serious and critical axe-core violations on the page as it stands, one line each."""
    # Evaluated through the DevTools protocol: a script tag of it would be refused by the page's CSP.
    page.evaluate(axe_source + "\n;0")
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [
        f"{v['impact']}: {v['id']} ({v['help']}) at {[n['target'] for n in v['nodes']][:3]}"
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("username", list(PAGES), ids=lambda u: u or "anonymous")
def test_every_page_passes_axe(server, chromium, axe_source, username, view):
    live, ids = server
    password, paths = PAGES[username]
    context = chromium.new_context(**view)
    page = context.new_page()
    if username:
        page.goto(live.url + "/accounts/login/")
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", password)
        page.click("button[type=submit]")
        page.wait_for_url(live.url + "/")
    problems = {}
    for path in paths:
        response = page.goto(live.url + path.format(**ids))
        assert response.status == 200, path
        page.wait_for_load_state("networkidle")
        found = axe_problems(page, axe_source)
        # No page scrolls sideways at any width (wide tables scroll inside their own region).
        width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        if width[0] > width[1] + 1:
            found.append(f"the page scrolls sideways: {width[0]} px wide in a {width[1]} px window")
        if found:
            problems[path] = found
    context.close()
    assert not problems, json.dumps(problems, indent=1)


def test_the_phone_menu_open_passes_axe(server, chromium, axe_source):
    """The top bar's Menu, open on a phone over a page: its links, the theme switch, the bell."""
    live, _ = server
    context = chromium.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    page.goto(live.url + "/accounts/login/")
    page.fill("input[name=username]", "root")
    page.fill("input[name=password]", "pw-root-12345")
    page.click("button[type=submit]")
    page.wait_for_url(live.url + "/")
    page.goto(live.url + "/documents/")
    page.locator(".topbar-menu > summary").click()
    assert page.get_by_role("link", name="Admin").is_visible()
    assert not axe_problems(page, axe_source)
    context.close()
