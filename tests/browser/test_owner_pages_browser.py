"""An owner's and an admin's pages as a person sees them, at 1280x800 and 390x844: the labels on the
sources of a question page ("cited", "Outdated") stay labels beside the document's name, and the
audit log reads at both widths (its action labels on one line; on a phone every column of every
event on screen, nothing scrolling sideways). Screenshots in test-artifacts/."""

from __future__ import annotations

import json

import pytest

from tests.browser.conftest import ARTIFACTS, WIDTHS, LiveServer, assert_no_sideways_scroll, sign_in

pytestmark = pytest.mark.browser

LONG_NAME = "Maximiliane Oberhauser-Wittgenstein"
SETUP = r"""
import json
from django.utils import timezone
from access.audit import audit_record
from access.models import AuditEvent
from ragchat.models import User
from tests.access.conftest import build_world
w = build_world(User)
# The question routed to Fiona (tag Beta): its draft cited the Beta passage, which is since outdated.
rq = w.questions["rq_b"]
rq.citations = [{**c, "cited": c["document_id"] == str(w.docs["doc_b"].pk)} for c in rq.citations]
rq.save(update_fields=["citations"])
w.docs["doc_b"].__class__.objects.filter(pk=w.docs["doc_b"].pk).update(
    outdated_at=timezone.now(), outdated_by=w.users["owner_b"], outdated_note="Replaced by the 2026 policy.")
person = User.objects.create_user("max", password="pw-max-12345", first_name=%(long)r)
root = w.users["superuser"]
for action, summary in [
    (AuditEvent.Action.MEMBERSHIP_REMOVED, "Removed from Beta by the company directory's group sync"),
    (AuditEvent.Action.TOKEN_REVOKED, "Token “laptop export” (read) revoked"),
    (AuditEvent.Action.TAG_OWNER_CHANGED, "Alpha: owner Oscar -> " + %(long)r),
    (AuditEvent.Action.GROUPS_SYNCED, "3 groups synced: 2 memberships added, 1 removed"),
    (AuditEvent.Action.SIGN_IN, "Password sign-in"),
]:
    audit_record(action=action, tenant_id="default", actor=root, subject=person, summary=summary)
print(json.dumps({"rq_b": rq.pk}))
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory, ollama_server):
    live = LiveServer(data_dir=tmp_path_factory.mktemp("owner-pages"), ollama_url=ollama_server.url)
    live.manage("migrate", "-v0")
    ids = json.loads(live.shell(SETUP % {"long": LONG_NAME}).strip().splitlines()[-1])
    live.start()
    yield live, ids
    live.stop()


def _page(chromium, width, height):
    context = chromium.new_context(viewport={"width": width, "height": height}, is_mobile=width < 600)
    return context, context.new_page()


@pytest.mark.parametrize("width,height", WIDTHS)
def test_source_labels_stay_beside_the_document_name(server, chromium, width, height):
    live, ids = server
    context, page = _page(chromium, width, height)
    sign_in(page, live.url, "fiona", "pw-fiona-12345")
    page.goto(f"{live.url}/routing/q/{ids['rq_b']}/")
    source = page.locator("section:has(#src-title) .sources-list li").first
    assert "cited" in source.inner_text() and "Outdated" in source.inner_text()
    name = source.locator(".src-doc").bounding_box()
    body = source.locator(".src-body").bounding_box()
    for label in ("cited", "Outdated"):
        pill = source.locator(f".pill:has-text('{label}')").bounding_box()
        # A label as wide as its word, not a bar across the card; on the name's line when it fits.
        assert pill["width"] < 120 and pill["width"] < body["width"] / 2, (label, pill, body)
        if width > 600:
            assert abs(pill["y"] + pill["height"] / 2 - (name["y"] + name["height"] / 2)) < name["height"], (
                label,
                pill,
                name,
            )
    assert_no_sideways_scroll(page)
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#src-title").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / f"question-sources-labels-{width}.png"))
    context.close()


@pytest.mark.parametrize("width,height", WIDTHS)
def test_the_audit_log_reads_at_both_widths(server, chromium, width, height):
    live, _ = server
    context, page = _page(chromium, width, height)
    sign_in(page, live.url, "root", "pw-root-12345")
    page.goto(live.url + "/access/audit/")
    rows = page.locator(".audit-table tbody tr")
    assert rows.count() >= 6
    # Every action label on one line: all of them as tall as the shortest one ("Signed in").
    heights = page.evaluate(
        "[...document.querySelectorAll('.audit-table .pill')].map(p => [p.textContent, p.getBoundingClientRect().height])"
    )
    shortest = min(h for _, h in heights)
    assert all(h < shortest * 1.5 for _, h in heights), heights
    assert_no_sideways_scroll(page)
    # Every cell of every event on screen: nothing cut at the window's edge, no sideways scrolling
    # inside the page either (on a phone each event is a card of its own).
    view = page.evaluate("window.innerWidth")
    cells = page.evaluate(
        """[...document.querySelectorAll('.audit-table tbody td')].map(td => {
             const r = td.getBoundingClientRect();
             return [td.textContent.trim().slice(0, 40), Math.round(r.left), Math.round(r.right)];
           })"""
    )
    cut = [c for c in cells if c[1] < 0 or c[2] > view]
    assert not cut, f"cells past the {view} px window: {cut[:5]}"
    text = page.inner_text(".audit-table")
    assert LONG_NAME in text and "Tag membership removed" in text
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"audit-log-{width}.png"), full_page=True)
    context.close()
