"""Dates and times are written one way across the app: "27 Nov 2026, 13:02", "27 Nov 2026", "27 Nov"
(ragchat/formats/en/formats.py, the FORMAT_MODULE_PATH setting). A datetime a template writes as it
is, a named format, and Python's ragchat.dates all give it; no template or module spells a format of
its own (machine formats stay: ISO 8601 in datetime attributes, CSV and the API)."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from pathlib import Path

from django.template import Context, Template

from ragchat.dates import shown_date, shown_datetime, shown_month_day

ROOT = Path(__file__).resolve().parent.parent
WHEN = datetime(2026, 11, 27, 13, 2, tzinfo=UTC)
NAMED = {"DATE_FORMAT", "DATETIME_FORMAT", "MONTH_DAY_FORMAT", "TIME_FORMAT", "c", "Ymd"}


def test_a_datetime_reads_the_same_written_plainly_by_name_and_from_python(settings):
    settings.TIME_ZONE = "UTC"
    shown = Template(
        '{{ when }}|{{ when|date:"DATETIME_FORMAT" }}|{{ when|date }}|{{ day }}|{{ when|date:"MONTH_DAY_FORMAT" }}'
    ).render(Context({"when": WHEN, "day": date(2026, 11, 7)}))
    assert shown == "27 Nov 2026, 13:02|27 Nov 2026, 13:02|27 Nov 2026|7 Nov 2026|27 Nov"
    assert (shown_datetime(WHEN), shown_date(WHEN), shown_date(date(2026, 11, 7)), shown_month_day(WHEN)) == (
        "27 Nov 2026, 13:02",
        "27 Nov 2026",
        "7 Nov 2026",
        "27 Nov",
    )


def test_python_writes_local_time(settings):
    settings.TIME_ZONE = "Europe/Berlin"
    assert shown_datetime(WHEN) == "27 Nov 2026, 14:02"


def test_no_template_spells_a_date_format_of_its_own():
    spelled = []
    for path in sorted((ROOT / "templates").rglob("*.*")):
        for match in re.finditer(r"\|(?:date|time):\s*[\"']([^\"']*)[\"']", path.read_text()):
            if match.group(1) not in NAMED:
                spelled.append(f"{path.relative_to(ROOT)}: {match.group(0)}")
    assert not spelled, spelled


def test_no_module_spells_a_date_for_people():
    """strftime's month names ("%b", "%B") and 12-hour clock ("%p") are for people: ragchat.dates
    writes those."""
    spelled = []
    apps = [d for d in ROOT.iterdir() if d.is_dir() and (d / "__init__.py").exists() and d.name != "tests"]
    for path in sorted(p for app in apps for p in app.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if "migrations" in relative.parts:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"%-?[bBp]\b|:%-?[bB]\}", line) and ("strftime" in line or "{" in line):
                spelled.append(f"{relative}:{n}: {line.strip()}")
    assert not spelled, spelled
