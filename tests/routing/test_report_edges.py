"""The knowledge-gap report at its edges: a bad period's CSV link downloads the period shown, one
question reads "1 question", a document just added (a verified answer published a minute ago) is
not listed as never cited, and the phone's chart labels do not run together."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from documents.models import Document
from routing import charts, figures
from tests.routing.test_report import _doc, data  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_bad_period_downloads_the_csv_of_the_period_shown(data):  # noqa: F811
    client = _client(data["owner"])
    url = reverse("routing:report", args=["alpha"])
    page = client.get(url, {"period": "custom", "start": "2026-02-10", "end": "2026-01-01"}).content.decode()
    assert "must start before it ends" in page and "Showing the last 30 days." in page
    link = re.search(r'href="([^"]*/csv/[^"]*)" download', page).group(1).replace("&amp;", "&")
    assert link == reverse("routing:report_csv", args=["alpha"]) + "?period=30d"
    response = client.get(link)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    # A good custom period's link carries its dates.
    today = timezone.localdate()
    good = {"period": "custom", "start": str(today - timedelta(days=3)), "end": str(today)}
    page = client.get(url, good).content.decode()
    assert f"/csv/?period=custom&amp;start={good['start']}&amp;end={good['end']}" in page


def test_one_question_is_one_question(data):  # noqa: F811
    # Beta's owner: one answer drew on a beta document in the last 30 days.
    page = _client(data["owner_b"]).get(reverse("routing:report", args=["beta"])).content.decode()
    assert '<span class="stat-value">1</span><span class="stat-label">question asked</span>' in page
    page = _client(data["owner"]).get(reverse("routing:report", args=["alpha"])).content.decode()
    assert '<span class="stat-value">11</span><span class="stat-label">questions asked</span>' in page


def test_a_document_just_added_is_not_yet_never_cited(data):  # noqa: F811
    doc_a, doc_v, doc_n, doc_b = data["docs"]
    just_published = _doc(data["alpha"], "Verified: where is the alpha form?", data["owner"])
    Document.objects.filter(pk=just_published.pk).update(created_at=timezone.now() - timedelta(minutes=1))
    now = timezone.now()
    report = figures.tag_report(user=data["owner"], tag=data["alpha"], since=now - timedelta(days=30), until=now)
    assert report.never_cited == [doc_n] and report.recent_uncited == 1
    page = _client(data["owner"]).get(reverse("routing:report", args=["alpha"])).content.decode()
    assert "Verified: where is the alpha form?" not in page
    assert "1 document added in the last 7 days is not listed: too new to have been cited." in page
    body = _client(data["owner"]).get(reverse("routing:report_csv", args=["alpha"])).content.decode()
    rows = [r for r in csv.reader(io.StringIO(body)) if r[0] == "never cited"]
    assert rows == [
        ["never cited", "Alpha never used", "0", ""],
        ["never cited", "added in the last 7 days, not listed", "1", "documents not cited yet, too new to count"],
    ]


def test_on_a_phone_a_chart_shows_the_labels_its_width_holds(data):  # noqa: F811
    now = data["now"]
    week = charts.questions_chart(
        figures.tag_report(user=data["owner"], tag=data["alpha"], since=now - timedelta(days=7), until=now)
    )
    # Seven days, seven labels on a desktop; every other one on a phone.
    assert len(week.x_labels) == 7
    assert [label.minor for label in week.x_labels] == [False, True, False, True, False, True, False]
    month = charts.questions_chart(
        figures.tag_report(user=data["owner"], tag=data["alpha"], since=now - timedelta(days=30), until=now)
    )
    assert [label.minor for label in month.x_labels] == [False] * 5  # five weeks: room for each
