"""Writes to the audit log. One function records an event; reads are in `access.selectors`."""

from __future__ import annotations

from typing import Any

from access.models import AuditEvent


def _name(user) -> str:
    if user is None:
        return ""
    return (user.get_full_name() or user.get_username())[:150]


def client_ip(request) -> str | None:
    if request is None:
        return None
    return request.META.get("REMOTE_ADDR") or None


def audit_record(
    *,
    action: str,
    tenant_id: str,
    actor=None,
    subject=None,
    summary: str = "",
    data: dict[str, Any] | None = None,
    request=None,
) -> AuditEvent:
    return AuditEvent.objects.create(
        tenant_id=tenant_id,
        action=action,
        actor=actor if actor is not None and getattr(actor, "pk", None) else None,
        actor_name=_name(actor) if actor is not None and getattr(actor, "pk", None) else "",
        subject=subject,
        subject_name=_name(subject),
        summary=summary[:500],
        data=data or {},
        ip_address=client_ip(request),
    )
