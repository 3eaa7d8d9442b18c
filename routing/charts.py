"""The knowledge-gap report's charts, drawn by the server: this module computes the geometry (bars,
axis ticks, labels) in a fixed coordinate system; the templates (`routing/_chart_*.html`) write it
as inline SVG with presentation attributes and CSS classes only — no script, no inline style, so the
strict Content-Security-Policy holds and the charts follow the light and dark themes.

Every chart also has a table alternative in the page (the same figures), and a title and
description for screen readers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ragchat.dates import shown_month_day
from routing.figures import OUTCOMES, Report

WIDTH, HEIGHT = 480, 240
LEFT, RIGHT, TOP, BOTTOM = 34, 8, 24, 34  # TOP: room for a full bar's total above it

# Time-to-answer bins: (upper bound in hours, label); the last is open-ended.
WAIT_BINS = ((1, "< 1 h"), (4, "1–4 h"), (24, "4–24 h"), (48, "1–2 d"), (168, "2–7 d"), (None, "> 7 d"))


def nice_max(value: int) -> int:
    """The smallest of 1, 2, 5 × 10^k at least `value` (at least 1): the axis's top."""
    if value <= 1:
        return 1
    magnitude = 10 ** int(math.floor(math.log10(value)))
    for step in (1, 2, 5, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude  # pragma: no cover - the loop always returns


@dataclass(frozen=True)
class Segment:
    x: float
    y: float
    width: float
    height: float
    css: str  # the outcome's class (colour)
    title: str  # read by a hover tooltip and screen readers


@dataclass(frozen=True)
class Label:
    x: float
    y: float
    text: str
    minor: bool = False  # left out on a phone, where the chart's text is larger against its bars


# On a phone (static/css/app.css, max-width 600px) the chart's text is 17 units high, to stay readable
# once the 480-unit chart is shrunk to the screen: a character takes about 0.6 of that.
NARROW_CHAR_WIDTH = 17 * 0.6
NARROW_LABEL_GAP = 10


def narrow_step(*, every: int, slot: float, longest: int) -> int:
    """Every how many bars a phone shows a label: a multiple of `every` (the desktop's step) whose
    span holds the longest label and a gap."""
    needed = longest * NARROW_CHAR_WIDTH + NARROW_LABEL_GAP
    step = every
    while step * slot < needed:
        step += every
    return step


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    segments: list[Segment]
    x_labels: list[Label]
    y_ticks: list[Label]  # x, y of the grid line's left end; text = the value
    plot_left: int
    plot_right: int
    empty: bool
    values: list[Label]  # totals above the bars


def _y_ticks(top: int) -> list[Label]:
    plot_h = HEIGHT - TOP - BOTTOM
    steps = 4 if top % 4 == 0 else (5 if top % 5 == 0 else (2 if top % 2 == 0 else 1))
    return [
        Label(x=LEFT, y=round(TOP + plot_h - plot_h * (i / steps), 1), text=str(top * i // steps))
        for i in range(steps + 1)
    ]


def _slots(n: int) -> tuple[float, float]:
    slot = (WIDTH - LEFT - RIGHT) / max(1, n)
    return slot, max(4.0, slot * 0.64)


def _date(d) -> str:
    return shown_month_day(d)


def questions_chart(report: Report) -> Chart:
    """Questions per day or week, stacked by outcome."""
    buckets = report.buckets
    top = nice_max(max((b.total for b in buckets), default=0))
    plot_h = HEIGHT - TOP - BOTTOM
    slot, bar = _slots(len(buckets))
    names = dict(OUTCOMES)
    segments, labels, values = [], [], []
    every = max(1, math.ceil(len(buckets) / 7))  # at most 7 date labels
    narrow = narrow_step(every=every, slot=slot, longest=max((len(_date(b.start)) for b in buckets), default=0))
    for i, b in enumerate(buckets):
        x = LEFT + i * slot + (slot - bar) / 2
        y = TOP + plot_h
        span = _date(b.start) if report.bucket_days == 1 else f"{_date(b.start)}–{_date(b.last)}"
        for key, _ in OUTCOMES:
            count = b.counts[key]
            if not count:
                continue
            h = plot_h * count / top
            y -= h
            segments.append(
                Segment(
                    x=round(x, 1),
                    y=round(y, 1),
                    width=round(bar, 1),
                    height=round(h, 1),
                    css=f"seg-{key}",
                    title=f"{span}: {count} {names[key].lower()}",
                )
            )
        if b.total:
            values.append(Label(x=round(x + bar / 2, 1), y=round(y - 3, 1), text=str(b.total)))
        if i % every == 0:
            labels.append(
                Label(x=round(x + bar / 2, 1), y=HEIGHT - BOTTOM + 16, text=_date(b.start), minor=i % narrow != 0)
            )
    return Chart(
        width=WIDTH,
        height=HEIGHT,
        segments=segments,
        x_labels=labels,
        y_ticks=_y_ticks(top),
        plot_left=LEFT,
        plot_right=WIDTH - RIGHT,
        empty=not any(b.total for b in buckets),
        values=values,
    )


def wait_bins(waits: list[float]) -> list[tuple[str, int, float | None]]:
    """(label, count, upper bound in hours) of each time-to-answer bin."""
    counts = [0] * len(WAIT_BINS)
    for seconds in waits:
        hours = seconds / 3600
        for i, (upper, _) in enumerate(WAIT_BINS):
            if upper is None or hours < upper:
                counts[i] += 1
                break
    return [(label, counts[i], upper) for i, (upper, label) in enumerate(WAIT_BINS)]


def waits_chart(report: Report) -> Chart:
    """How long routed questions waited for a person's answer; bins past the tag's target time are
    drawn as late."""
    bins = wait_bins(report.waits)
    top = nice_max(max((c for _, c, _ in bins), default=0))
    plot_h = HEIGHT - TOP - BOTTOM
    slot, bar = _slots(len(bins))
    target = report.target_hours
    segments, labels, values = [], [], []
    lower: float = 0
    narrow = narrow_step(every=1, slot=slot, longest=max(len(label) for label, _, _ in bins))
    for i, (label, count, upper) in enumerate(bins):
        x = LEFT + i * slot + (slot - bar) / 2
        late = target is not None and lower >= target
        if count:
            h = plot_h * count / top
            segments.append(
                Segment(
                    x=round(x, 1),
                    y=round(TOP + plot_h - h, 1),
                    width=round(bar, 1),
                    height=round(h, 1),
                    css="seg-late" if late else "seg-wait",
                    title=f"{label}: {count} {'question' if count == 1 else 'questions'}"
                    + (" (past the target time)" if late else ""),
                )
            )
            values.append(Label(x=round(x + bar / 2, 1), y=round(TOP + plot_h - h - 3, 1), text=str(count)))
        labels.append(Label(x=round(x + bar / 2, 1), y=HEIGHT - BOTTOM + 16, text=label, minor=i % narrow != 0))
        lower = upper or lower
    return Chart(
        width=WIDTH,
        height=HEIGHT,
        segments=segments,
        x_labels=labels,
        y_ticks=_y_ticks(top),
        plot_left=LEFT,
        plot_right=WIDTH - RIGHT,
        empty=not report.waits,
        values=values,
    )
