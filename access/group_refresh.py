"""Groups asked of the identity provider now, with each person's refresh token (`manage.py
sync_groups`), and applied by `access.group_sync.sync_user`.

Apart from `access.group_sync` because the provider is reached through `access.oidc`, which applies
the groups of each sign-in with `access.group_sync`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import requests
from django.conf import settings

from access import oidc
from access.audit import audit_record
from access.group_sync import sync_user
from access.models import AuditEvent, OIDCIdentity


class ProviderRefused(Exception):
    """The provider says the person's grant is gone (invalid_grant): disabled, removed, revoked."""


def current_groups(identity: OIDCIdentity) -> list[str]:
    """Ask the provider for the person's groups now, with their refresh token (rotated if the
    provider sends a new one). Raises ProviderRefused on invalid_grant, requests' errors or
    oidc.SignInRefused when the provider cannot be asked or answers with something unusable."""
    refresh_token = oidc.unseal(identity.refresh_token)
    if not refresh_token:
        raise LookupError("no refresh token is stored for this person (they have not signed in with offline access)")
    endpoints = oidc.discovery()
    response = requests.post(
        endpoints["token_endpoint"],
        data={
            "grant_type": "refresh_token",
            "refresh_token": refresh_token,
            "client_id": settings.OIDC_RP_CLIENT_ID,
            "client_secret": settings.OIDC_RP_CLIENT_SECRET,
            "scope": settings.OIDC_RP_SCOPES,
        },
        timeout=settings.OIDC_TIMEOUT,
    )
    if response.status_code in (400, 401):
        try:
            error = response.json().get("error", "")
        except ValueError:
            error = ""
        if error == "invalid_grant":
            raise ProviderRefused("the provider refused the person's refresh token (invalid_grant)")
    response.raise_for_status()
    tokens = response.json()
    claims: dict = {}
    backend = oidc.OIDCBackend()
    if tokens.get("id_token"):
        claims.update(backend.verify_token(tokens["id_token"], nonce=None))
        if claims.get("sub") != identity.subject:
            raise oidc.SignInRefused("the provider's new ID token names another person")
    userinfo_endpoint = endpoints.get("userinfo_endpoint")
    if userinfo_endpoint and tokens.get("access_token"):
        info = requests.get(
            userinfo_endpoint,
            headers={"Authorization": f"Bearer {tokens['access_token']}"},
            timeout=settings.OIDC_TIMEOUT,
        )
        info.raise_for_status()
        data = info.json()
        if data.get("sub") != identity.subject:
            raise oidc.SignInRefused("the provider's user information names another person")
        claims.update(data)
    if not claims:
        raise oidc.SignInRefused("the provider's refresh answer had neither an ID token nor user information")
    if tokens.get("refresh_token") and tokens["refresh_token"] != refresh_token:
        identity.refresh_token = oidc.seal(tokens["refresh_token"])
        identity.save(update_fields=["refresh_token"])
    return oidc.groups_from(claims)


@dataclass
class RunReport:
    synced: int = 0
    changed: int = 0
    removed_for_refused: int = 0
    last_known: int = 0
    failed: list[str] = field(default_factory=list)


def sync_everyone(*, tenant_id: str | None = None, offline: bool = False) -> RunReport:
    """`manage.py sync_groups`: every company account (of one tenant, or all), asking the provider.

    - the provider answers: its groups are applied;
    - it refuses the grant (invalid_grant: disabled, removed, consent revoked): every synced
      membership of the person goes, and the stored refresh token is dropped;
    - no refresh token, or `offline`: the last-known groups are re-applied;
    - the provider cannot be reached or answers badly: nothing changes for that person, and the
      run reports it (and stores the error on the identity).
    """
    report = RunReport()
    per_tenant: dict[str, RunReport] = defaultdict(RunReport)
    identities = OIDCIdentity.objects.select_related("user").order_by("user__tenant_id", "user__username")
    if tenant_id:
        identities = identities.filter(user__tenant_id=tenant_id)
    for identity in identities:
        user = identity.user
        mine = per_tenant[user.tenant_id]
        try:
            if offline or not identity.refresh_token:
                groups = list(identity.groups or [])
                report.last_known += 1
                mine.last_known += 1
            else:
                groups = current_groups(identity)
        except ProviderRefused as e:
            result = sync_user(user, [], source="provider refused the grant")
            identity.refresh_token = ""
            identity.sync_error = str(e)[:500]
            identity.save(update_fields=["refresh_token", "sync_error"])
            for r in (report, mine):
                r.removed_for_refused += 1
                r.synced += 1
                r.changed += int(result.changed)
            continue
        except (requests.RequestException, ValueError, LookupError, oidc.SignInRefused) as e:
            message = f"{user.get_username()}: {e}"
            identity.sync_error = str(e)[:500]
            identity.save(update_fields=["sync_error"])
            report.failed.append(message)
            mine.failed.append(message)
            continue
        result = sync_user(user, groups, source="sync_groups")
        for r in (report, mine):
            r.synced += 1
            r.changed += int(result.changed)
    for tenant, r in per_tenant.items():
        audit_record(
            action=AuditEvent.Action.GROUPS_SYNCED,
            tenant_id=tenant,
            summary=f"groups synced for {r.synced} people ({r.changed} changed, {r.removed_for_refused} refused by "
            f"the provider, {len(r.failed)} not reached)" + (" from last-known groups" if offline else ""),
            data={
                "synced": r.synced,
                "changed": r.changed,
                "refused": r.removed_for_refused,
                "last_known": r.last_known,
                "failed": r.failed[:50],
            },
        )
    return report
