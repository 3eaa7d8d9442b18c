"""Send the reminders and daily digests that are due (routing/reminders.py), then exit.

    manage.py send_reminders                          # what is due now
    manage.py send_reminders --now 2026-11-25T07:30   # as of another time (local unless an offset is given)

With in-process ingestion the server does this itself on its schedule (RAGCHAT_SCHEDULE_MINUTES);
with the "tasks" backend run it from cron or a systemd timer, e.g. every 15 minutes. Running it
twice, or in two places at once, sends nothing twice.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from routing.reminders import run_due


class Command(BaseCommand):
    help = "Send the reminders (items waiting past their target time) and daily digests that are due."

    def add_arguments(self, parser):
        parser.add_argument("--now", help="ISO date and time to act as of (default: now)")

    def handle(self, *args, now=None, **options):
        at = timezone.now()
        if now:
            parsed = parse_datetime(now)
            if parsed is None:
                raise CommandError(f"--now: not a date and time: {now!r} (e.g. 2026-11-25T07:30)")
            at = parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed)
        done = run_due(at)
        self.stdout.write(f"reminders: {done['reminders']} email(s); digests: {done['digests']} email(s)")
