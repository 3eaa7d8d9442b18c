"""Reads of the audit log, for admins."""

from __future__ import annotations

from django.db.models import QuerySet

from access import policy
from access.models import AuditEvent


def audit_events(*, user, action: str | None = None) -> QuerySet[AuditEvent]:
    if not policy.may_read_audit_log(user):
        return AuditEvent.objects.none()
    events = AuditEvent.objects.filter(tenant_id=user.tenant_id).select_related("actor", "subject")
    if action:
        events = events.filter(action=action)
    return events.order_by("-created_at", "-id")
