"""Sign-in events to the audit log (successful and failed sign-ins, lockouts)."""

from __future__ import annotations

from axes.signals import user_locked_out
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.dispatch import receiver

from access import oidc
from access.audit import audit_record
from access.models import AuditEvent


@receiver(user_logged_in, dispatch_uid="access-audit-sign-in")
def _signed_in(sender, request, user, **kwargs):
    company = getattr(user, "backend", "") == "access.oidc.OIDCBackend"
    audit_record(
        action=AuditEvent.Action.SIGN_IN,
        tenant_id=user.tenant_id,
        actor=user,
        subject=user,
        summary=f"{user.get_username()} signed in" + (f" with {oidc.label()}" if company else ""),
        data={"method": "oidc" if company else "password"},
        request=request,
    )


def _user_named(username: str):
    if not username:
        return None
    return get_user_model().objects.filter(username=username).first()


@receiver(user_login_failed, dispatch_uid="access-audit-sign-in-failed")
def _sign_in_failed(sender, credentials, request=None, **kwargs):
    company = oidc.describe_failure(request, credentials or {})
    if company is not None:
        who, reason, user = company
        audit_record(
            action=AuditEvent.Action.SIGN_IN_FAILED,
            tenant_id=user.tenant_id if user else settings.RAGCHAT_OIDC_TENANT,
            subject=user,
            summary=f"failed sign-in with {oidc.label()}" + (f" as “{who}”" if who else "") + f": {reason}",
            data={"method": "oidc", "username": who, "reason": reason},
            request=request,
        )
        return
    username = str((credentials or {}).get("username") or "")[:150]
    user = _user_named(username)
    audit_record(
        action=AuditEvent.Action.SIGN_IN_FAILED,
        tenant_id=user.tenant_id if user else "",
        subject=user,
        summary=f"failed sign-in as “{username}”",
        data={"username": username},
        request=request,
    )


@receiver(user_locked_out, dispatch_uid="access-audit-locked-out")
def _locked_out(sender, request=None, username=None, ip_address=None, **kwargs):
    user = _user_named(str(username or ""))
    audit_record(
        action=AuditEvent.Action.LOCKED_OUT,
        tenant_id=user.tenant_id if user else "",
        subject=user,
        summary=f"“{username}” locked out after repeated failed sign-ins",
        data={"username": str(username or ""), "ip_address": ip_address},
        request=request,
    )
