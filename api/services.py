"""Writes of the api app: making and revoking personal access tokens (both audited), and reading a
presented token back. Who may revoke what is decided by access.policy."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from access.audit import audit_record
from access.models import AuditEvent
from api.models import AccessToken

TOKEN_PREFIX = "rct_"
LAST_USED_PRECISION = timedelta(minutes=1)  # at most one write a minute per token for "last used"


# What a person is told when a token's form lacks a name or a scope (the page's form says it too).
NAME_MISSING = "Give the token a name, so you know later what uses it."
SCOPE_MISSING = "Choose at least one scope: read, chat, upload or answer."


class TokenRefused(Exception):
    """The token cannot be made as asked; the message is for the person."""


@dataclass(frozen=True)
class NewToken:
    token: AccessToken
    secret: str  # the whole token, shown once


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def token_create(
    *, user, name: str, scopes: Sequence[str], expires_in_days: int | None, request=None, now: datetime | None = None
) -> NewToken:
    name = (name or "").strip()
    if not name:
        raise TokenRefused(NAME_MISSING)
    scopes = sorted({s for s in scopes})
    unknown = [s for s in scopes if s not in AccessToken.Scope.values]
    if not scopes or unknown:
        raise TokenRefused(SCOPE_MISSING)
    now = now or timezone.now()
    key_id = secrets.token_hex(6)
    secret = f"{TOKEN_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    token = AccessToken.objects.create(
        user=user,
        name=name[:100],
        key_id=key_id,
        secret_hash=_hash(secret),
        scopes=scopes,
        expires_at=now + timedelta(days=expires_in_days) if expires_in_days else None,
    )
    audit_record(
        action=AuditEvent.Action.TOKEN_CREATED,
        tenant_id=user.tenant_id,
        actor=user,
        subject=user,
        summary=f"Token “{token.name}” ({token.prefix}…), scopes {', '.join(scopes)}",
        data={
            "token_id": token.pk,
            "scopes": scopes,
            "expires_at": token.expires_at.isoformat() if token.expires_at else None,
        },
        request=request,
    )
    return NewToken(token=token, secret=secret)


def token_revoke(*, token: AccessToken, by, request=None) -> AccessToken:
    """Revoke a token (the caller asked access.policy.revocable_token); revoking twice changes nothing."""
    if token.revoked_at is not None:
        return token
    token.revoked_at = timezone.now()
    token.revoked_by = by
    token.save(update_fields=["revoked_at", "revoked_by"])
    audit_record(
        action=AuditEvent.Action.TOKEN_REVOKED,
        tenant_id=token.user.tenant_id,
        actor=by,
        subject=token.user,
        summary=f"Token “{token.name}” ({token.prefix}…) revoked",
        data={"token_id": token.pk},
        request=request,
    )
    return token


def token_lookup(secret: str) -> AccessToken | None:
    """The token row a presented secret names, compared in constant time; None when it names none.
    Whether it may still be used is access.policy.token_user's question."""
    if not secret.startswith(TOKEN_PREFIX):
        return None
    key_id, _, rest = secret[len(TOKEN_PREFIX) :].partition("_")
    if not key_id or not rest:
        return None
    token = AccessToken.objects.select_related("user").filter(key_id=key_id).first()
    if token is None or not hmac.compare_digest(token.secret_hash, _hash(secret)):
        return None
    return token


def token_touch(token: AccessToken) -> None:
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_PRECISION:
        AccessToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
