"""The knowledge-gap report as CSV (the standard library's csv writer): one file, one row per
figure, per chart bucket, per unanswered group and per document, the first column naming the
section, so a spreadsheet filter shows each list on its own.

Cells people wrote (questions, titles) are neutralised against formula injection: a cell starting
with = + - @ (or a tab / carriage return) gets a leading apostrophe, as spreadsheet tools advise.
"""

from __future__ import annotations

import csv

from routing.charts import wait_bins
from routing.figures import NEVER_CITED_GRACE_DAYS, OUTCOMES, Report

HEADER = ["section", "item", "value", "detail"]


def safe_cell(value) -> str:
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _pct(value: int | None) -> str:
    return "" if value is None else str(value)


def report_rows(report: Report) -> list[list[str]]:
    seconds = lambda v: "" if v is None else str(round(v))  # noqa: E731
    rows = [
        ["period", "from", report.since.isoformat(timespec="seconds"), ""],
        ["period", "to", report.until.isoformat(timespec="seconds"), ""],
        ["figure", "tag", safe_cell(report.name), report.slug],
        ["figure", "questions asked", str(report.asked), ""],
        *(["figure", name.lower(), str(report.outcomes[key]), ""] for key, name in OUTCOMES),
        ["figure", "share answered without a person (%)", _pct(report.share_without_person), ""],
        ["figure", "share answered by verified knowledge (%)", _pct(report.share_verified), "deflection"],
        ["figure", "share routed (%)", _pct(report.share_routed), ""],
        ["figure", "still open", str(report.open), ""],
        ["figure", "answered by a person", str(report.answered_by_person), ""],
        ["figure", "median time to answer (s)", seconds(report.median_seconds), report.median_display],
        ["figure", "90th percentile time to answer (s)", seconds(report.p90_seconds), report.p90_display],
        ["figure", "votes", str(report.votes), ""],
        ["figure", "down votes", str(report.down_votes), ""],
        ["figure", "down-vote rate (%)", _pct(report.down_vote_rate), ""],
    ]
    for b in report.buckets:
        for key, name in OUTCOMES:
            rows.append(["questions per period", b.start.date().isoformat(), str(b.counts[key]), name.lower()])
    for label, count, _ in wait_bins(report.waits):
        rows.append(["time to answer", label, str(count), ""])
    for g in report.unanswered:
        rows.append(
            [
                "unanswered",
                safe_cell(g.question.question),
                str(g.people),
                f"{g.asked} question{'' if g.asked == 1 else 's'}; last asked {g.last_at.date().isoformat()}",
            ]
        )
    for c in report.cited:
        rows.append(["most cited", safe_cell(c.document.title), str(c.answers), "answers citing it"])
    for d in report.never_cited:
        rows.append(["never cited", safe_cell(d.title), "0", ""])
    rows.append(
        [
            "never cited",
            f"added in the last {NEVER_CITED_GRACE_DAYS} days, not listed",
            str(report.recent_uncited),
            "documents not cited yet, too new to count",
        ]
    )
    return rows


def report_csv(report: Report, out) -> None:
    writer = csv.writer(out)
    writer.writerow(HEADER)
    writer.writerows(report_rows(report))
