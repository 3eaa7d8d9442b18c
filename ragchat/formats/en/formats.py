"""How every page, email and export writes a date and a time: "27 Nov 2026" and "27 Nov 2026, 13:02"
(day first, month in three letters, 24-hour clock). A template writes a datetime as it is
(`{{ value }}`) or with a named format (`|date:"DATETIME_FORMAT"`, `|date` for the date alone,
`|date:"MONTH_DAY_FORMAT"`); Python code uses django.utils.formats.date_format(value, "DATETIME_FORMAT")
on a local time. tests/test_dates.py keeps templates and code from spelling a format of their own."""

DATE_FORMAT = "j M Y"
DATETIME_FORMAT = "j M Y, H:i"
TIME_FORMAT = "H:i"
MONTH_DAY_FORMAT = "j M"
YEAR_MONTH_FORMAT = "M Y"
SHORT_DATE_FORMAT = "j M Y"
SHORT_DATETIME_FORMAT = "j M Y, H:i"
