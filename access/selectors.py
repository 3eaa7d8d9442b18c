"""Reads of the audit log, for admins."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

from django.db.models import Q, QuerySet
from django.utils import timezone

from access import policy
from access.models import AuditEvent


def audit_events(
    *, user, action: str | None = None, person: str = "", since: date | None = None, until: date | None = None
) -> QuerySet[AuditEvent]:
    """The admin's tenant's events, newest first, narrowed by action, by a person (who acted or whom
    it was about: username or name, in part), and by day (both ends included, in the server's zone)."""
    if not policy.may_read_audit_log(user):
        return AuditEvent.objects.none()
    events = AuditEvent.objects.filter(tenant_id=user.tenant_id).select_related("actor", "subject")
    if action:
        events = events.filter(action=action)
    if person:
        events = events.filter(
            Q(actor_name__icontains=person)
            | Q(subject_name__icontains=person)
            | Q(actor__username__icontains=person)
            | Q(subject__username__icontains=person)
        )
    zone = timezone.get_current_timezone()
    if since:
        events = events.filter(created_at__gte=datetime.combine(since, time.min, tzinfo=zone))
    if until:
        events = events.filter(created_at__lt=datetime.combine(until + timedelta(days=1), time.min, tzinfo=zone))
    return events.order_by("-created_at", "-id")
