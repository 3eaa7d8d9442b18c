"""Dates and times as the app writes them for people, from Python (emails, exports, messages): the
formats of ragchat/formats/en/formats.py ("27 Nov 2026, 13:02", "27 Nov 2026", "27 Nov"), in the
server's time zone. Templates write them with the same formats (`|date:"DATETIME_FORMAT"`)."""

from __future__ import annotations

from datetime import date, datetime

from django.utils import formats, timezone


def _local(value: date | datetime) -> date | datetime:
    return timezone.localtime(value) if isinstance(value, datetime) and timezone.is_aware(value) else value


def shown_datetime(value: datetime) -> str:
    """ "27 Nov 2026, 13:02" (local time)."""
    return formats.date_format(_local(value), "DATETIME_FORMAT")


def shown_date(value: date | datetime) -> str:
    """ "27 Nov 2026" (a datetime's local day)."""
    return formats.date_format(_local(value), "DATE_FORMAT")


def shown_month_day(value: date | datetime) -> str:
    """ "27 Nov" (a datetime's local day)."""
    return formats.date_format(_local(value), "MONTH_DAY_FORMAT")
