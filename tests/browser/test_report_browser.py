"""The knowledge-gap report as its owner sees it, at desktop and phone widths: one question reads
"1 question", a verified answer published a minute ago is not listed as never cited (the page says
why), the 7-day chart's labels stand apart, and after a bad period "Download CSV" saves the CSV of
the period shown. Real daphne, Debian's Chromium."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.browser.conftest import ARTIFACTS, WIDTHS, assert_no_sideways_scroll, new_page, seeded_server, sign_in

pytestmark = pytest.mark.browser

PASSWORD = "report-pass-123"
SETUP = r"""
import uuid
from datetime import timedelta
from django.core.files.base import ContentFile
from django.utils import timezone
from chat.models import ChatSession, Message
from documents.models import Document
from documents.services import tag_create
from ragchat.models import User
olga = User.objects.create_user(username="olga", password=%(pw)r, first_name="Olga")
asker = User.objects.create_user(username="xavier", password=%(pw)r)
alpha = tag_create(tenant_id="default", name="Alpha", slug="alpha", owner=olga, members=[asker])
def doc(title, age):
    d = Document(title=title, original_filename=title + ".txt", content_hash=uuid.uuid4().hex, kind="text",
                 status=Document.Status.READY, uploaded_by=olga)
    d.file.save(uuid.uuid4().hex + ".txt", ContentFile(b"text"), save=False)
    d.save()
    d.tags.set([alpha])
    Document.objects.filter(pk=d.pk).update(created_at=timezone.now() - age)
    return d
handbook = doc("Alpha handbook", timedelta(days=60))
doc("Alpha never used", timedelta(days=60))
doc("Verified: where is the alpha form?", timedelta(minutes=1))
session = ChatSession.objects.create(owner=asker, title="s")
cite = {"source_id": f"{handbook.pk}:0", "document_id": str(handbook.pk), "document_name": handbook.title}
Message.objects.create(session=session, role="assistant", status="complete", content="answer", citations=[cite],
                       passages=[cite])
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory, ollama_server):
    live = seeded_server(tmp_path_factory, ollama_server, name="report-browser", setup=SETUP % {"pw": PASSWORD})
    yield live
    live.stop()


def _page(chromium, base, width, height):
    context, page = new_page(chromium, width=width, height=height, accept_downloads=True)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    sign_in(page, base, "olga", PASSWORD)
    return context, page, errors


# The visible x labels of a chart, left to right, as boxes on the screen.
LABEL_BOXES = """(id) => [...document.querySelectorAll(`svg[aria-labelledby~="${id}-t"] .chart-label`)]
  .filter((t) => getComputedStyle(t).display !== "none")
  .map((t) => { const r = t.getBoundingClientRect(); return [t.textContent, r.left, r.right]; })
  .sort((a, b) => a[1] - b[1])"""


# A chart's text that lies outside its drawing (cut off): the total above a full-height bar.
CUT_OFF = """(id) => { const svg = document.querySelector(`svg[aria-labelledby~="${id}-t"]`).getBoundingClientRect();
  return [...document.querySelectorAll(`svg[aria-labelledby~="${id}-t"] text`)]
    .filter((t) => getComputedStyle(t).display !== "none")
    .map((t) => [t.textContent, t.getBoundingClientRect()])
    .filter(([, r]) => r.top < svg.top - 0.5 || r.bottom > svg.bottom + 0.5 || r.left < svg.left - 0.5 || r.right > svg.right + 0.5)
    .map(([text]) => text); }"""


def _labels_apart(page, chart: str) -> list[str]:
    assert page.evaluate(CUT_OFF, chart) == [], f"{chart}: text cut off at the chart's edge"
    boxes = page.evaluate(LABEL_BOXES, chart)
    for (text, _, right), (following, left, _) in zip(boxes, boxes[1:], strict=False):
        assert left - right >= 4, f"{chart}: {text!r} and {following!r} run together ({boxes})"
    return [text for text, _, _ in boxes]


@pytest.mark.parametrize(("width", "height"), WIDTHS)
def test_the_report_reads_right_at_both_widths(server, chromium, width, height):
    context, page, errors = _page(chromium, server.url, width, height)
    page.goto(server.url + "/routing/report/alpha/?period=7d")
    stat = page.locator(".stat").first
    assert " ".join(stat.inner_text().split()) == "1 question asked"
    # The verified answer published a minute ago is not asked whether it is needed.
    never = page.locator("section[aria-labelledby=never-title]")
    assert "Alpha never used" in never.inner_text()
    assert "Verified: where is the alpha form?" not in never.inner_text()
    assert "1 document added in the last 7 days is not listed: too new to have been cited." in never.inner_text()
    # The 7-day chart's labels stand apart (a phone shows every other day), as do the waits'.
    days = _labels_apart(page, "qchart")
    assert len(days) == (7 if width > 600 else 4)
    _labels_apart(page, "wchart")
    assert_no_sideways_scroll(page)
    page.locator("svg[aria-labelledby~='qchart-t']").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / f"report-7d-{width}.png"))
    assert errors == []
    context.close()


@pytest.mark.parametrize(("width", "height"), WIDTHS)
def test_after_a_bad_period_the_csv_is_of_the_period_shown(server, chromium, width, height):
    context, page, errors = _page(chromium, server.url, width, height)
    page.goto(server.url + "/routing/report/alpha/")
    today = timezone.localdate()
    page.fill("input[name=start]", str(today))
    page.fill("input[name=end]", str(today - timedelta(days=10)))
    page.click(".report-period button[type=submit]")
    page.wait_for_selector(".report-controls .form-errors")
    assert "must start before it ends" in page.inner_text(".report-controls .form-errors")
    page.screenshot(path=str(ARTIFACTS / f"report-bad-period-{width}.png"))
    with page.expect_download() as download:
        page.click("a:has-text('Download CSV')")
    since = today - timedelta(days=30)
    assert download.value.suggested_filename == f"knowledge-gap-alpha-{since}-to-{today}.csv"
    with open(download.value.path(), encoding="utf-8") as saved:
        assert saved.readline().strip() == "section,item,value,detail"
    assert errors == []
    context.close()
