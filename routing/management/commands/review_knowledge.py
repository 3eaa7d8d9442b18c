"""Verified answers whose review date has passed need review (routing.knowledge.review_due).

    manage.py review_knowledge              # as of today
    manage.py review_knowledge --today 2027-01-31

The server runs the same check on its sources schedule (RAGCHAT_SCHEDULE_MINUTES) with in-process
ingestion; with the "tasks" backend run this daily from cron or a systemd timer. Running it twice
changes nothing the second time. With the embedded store, the chunks' payload is updated in this
process: run it while the server is stopped, or let the server's schedule do it.
"""

from __future__ import annotations

from datetime import date

from django.core.management.base import BaseCommand, CommandError

from routing.knowledge import review_due


class Command(BaseCommand):
    help = "Mark verified answers past their review date as needing review."

    def add_arguments(self, parser):
        parser.add_argument("--today", help="The day to check against (YYYY-MM-DD); default today.")

    def handle(self, *args, today=None, **options):
        day = None
        if today:
            try:
                day = date.fromisoformat(today)
            except ValueError as e:
                raise CommandError(f"--today {today!r}: expected a date like 2027-01-31.") from e
        marked = review_due(today=day)
        self.stdout.write(f"{marked} verified answer{'' if marked == 1 else 's'} now need review.")
