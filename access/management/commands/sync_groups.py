"""manage.py sync_groups: bring everyone's synced tag memberships in line with their identity
provider groups now (see access.group_refresh.sync_everyone). Run it from cron, e.g. every 15 minutes."""

from django.core.management.base import BaseCommand, CommandError

from access import oidc
from access.group_refresh import sync_everyone


class Command(BaseCommand):
    help = (
        "Sync every company account's groups to tags: ask the identity provider with each person's refresh "
        "token (a refused grant removes their synced memberships; an unreachable provider changes nothing and "
        "is reported); without a refresh token, or with --offline, re-apply the groups it sent last."
    )

    def add_arguments(self, parser):
        parser.add_argument("--tenant", default="", help="Only this tenant's people.")
        parser.add_argument(
            "--offline", action="store_true", help="Do not ask the provider: re-apply everyone's last-known groups."
        )

    def handle(self, *args, tenant: str, offline: bool, **options):
        if not offline and not oidc.enabled():
            raise CommandError(
                "Company sign-in is not configured (RAGCHAT_OIDC_ISSUER, RAGCHAT_OIDC_CLIENT_ID); "
                "use --offline to re-apply last-known groups."
            )
        report = sync_everyone(tenant_id=tenant or None, offline=offline)
        self.stdout.write(
            f"synced {report.synced} people: {report.changed} changed, {report.removed_for_refused} refused by the "
            f"provider (synced memberships removed), {report.last_known} from last-known groups, "
            f"{len(report.failed)} not reached"
        )
        for line in report.failed:
            self.stderr.write(f"not synced (memberships kept): {line}")
        if report.failed:
            raise CommandError(f"{len(report.failed)} people could not be synced; their memberships were kept.")
