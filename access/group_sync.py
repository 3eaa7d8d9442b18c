"""Group → tag sync: a person's identity-provider groups, through the admins' `GroupMapping`s, decide
their synced tag memberships and ownerships.

Synced roles are written where every manual one lives (`Tag.members`, `Tag.owner`), so that
`access.policy` stays the one reader of "which tags does this person hold"; a `SyncedMembership`
row marks each one as synced. A person who leaves a group loses what it gave them at once (their
next question is filtered by the tags they hold now), unless they also held it by hand before sync
gave it (`kept_manual`). An owner mapping makes a person the tag's owner when it has none; a synced
owner who leaves hands the tag to another person of the group, or leaves it without an owner (its
questions then go to the admins).

Runs at every company sign-in, for everyone from `manage.py sync_groups` (asking the provider with
each person's refresh token), and with the last-known groups when an admin changes a mapping.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import requests
from django.apps import apps
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from access.audit import audit_record
from access.models import AuditEvent, GroupMapping, OIDCIdentity, SyncedMembership

MEMBER, OWNER = GroupMapping.Role.MEMBER, GroupMapping.Role.OWNER


@dataclass
class SyncResult:
    added: list[str] = field(default_factory=list)  # "member of finance", "owner of finance"
    removed: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)


def _wanted(*, tenant_id: str, groups: list[str]) -> dict[tuple[int, str], list[str]]:
    """(tag id, role) → the groups that grant it. An owner mapping also grants membership."""
    wanted: dict[tuple[int, str], list[str]] = defaultdict(list)
    if not groups:
        return wanted
    for m in GroupMapping.objects.filter(tenant_id=tenant_id, group__in=groups, tag__tenant_id=tenant_id):
        wanted[(m.tag_id, MEMBER)].append(m.group)
        if m.role == OWNER:
            wanted[(m.tag_id, OWNER)].append(m.group)
    return wanted


def _record(action, *, user, actor, summary: str, data: dict, request) -> None:
    audit_record(
        action=action, tenant_id=user.tenant_id, actor=actor, subject=user, summary=summary, data=data, request=request
    )


def _successor(tag, *, leaving) -> object | None:
    """Another person whose last-known groups make them an owner of the tag, if any."""
    owner_groups = set(GroupMapping.objects.filter(tag=tag, role=OWNER).values_list("group", flat=True))
    if not owner_groups:
        return None
    for identity in (
        OIDCIdentity.objects.filter(user__tenant_id=tag.tenant_id, user__is_active=True)
        .exclude(user=leaving)
        .select_related("user")
        .order_by("user__username")
    ):
        if owner_groups & set(identity.groups or []):
            return identity.user
    return None


def sync_user(user, groups: list[str], *, source: str, actor=None, request=None) -> SyncResult:
    """Bring the person's synced memberships in line with `groups` (the provider's answer now)."""
    Tag = apps.get_model("documents.Tag")  # through the registry, as access.policy: no import cycle
    result = SyncResult()
    groups = sorted(set(groups))
    via = f"group sync ({source})"
    with transaction.atomic():
        wanted = _wanted(tenant_id=user.tenant_id, groups=groups)
        existing = {(s.tag_id, s.role): s for s in SyncedMembership.objects.filter(user=user).select_for_update()}
        tags = {t.pk: t for t in Tag.objects.filter(pk__in={k[0] for k in [*wanted, *existing]})}

        for (tag_id, role), granting in sorted(wanted.items(), key=lambda kv: kv[0][1] != MEMBER):
            tag = tags[tag_id]
            row = existing.get((tag_id, role))
            data = {"tag": tag.slug, "role": role, "groups": granting, "source": via}
            if role == MEMBER:
                already = tag.members.filter(pk=user.pk).exists()
                if row is None:
                    row = SyncedMembership.objects.create(
                        user=user, tag=tag, role=role, groups=granting, kept_manual=already
                    )
                elif row.groups != granting:
                    row.groups = granting
                    row.save(update_fields=["groups"])
                if not already:
                    tag.members.add(user)
                    result.added.append(f"member of {tag.slug}")
                    _record(
                        AuditEvent.Action.MEMBERSHIP_ADDED,
                        user=user,
                        actor=actor,
                        summary=f"{user.get_username()} became a member of {tag.name} by {via}: {', '.join(granting)}",
                        data=data,
                        request=request,
                    )
            else:  # owner
                if row is None:
                    if tag.owner_id == user.pk:
                        SyncedMembership.objects.create(
                            user=user, tag=tag, role=role, groups=granting, kept_manual=True
                        )
                    elif tag.owner_id is None:
                        SyncedMembership.objects.create(user=user, tag=tag, role=role, groups=granting)
                        tag.owner = user
                        tag.save(update_fields=["owner"])
                        result.added.append(f"owner of {tag.slug}")
                        _record(
                            AuditEvent.Action.TAG_OWNER_CHANGED,
                            user=user,
                            actor=actor,
                            summary=f"{user.get_username()} became the owner of {tag.name} by {via}",
                            data={**data, "previous_owner": None},
                            request=request,
                        )
                    # else: the tag has another owner; the membership above lets them read it.
                elif row.groups != granting:
                    row.groups = granting
                    row.save(update_fields=["groups"])

        for key, row in existing.items():
            if key in wanted:
                continue
            tag = tags[row.tag_id]
            row.delete()
            data = {"tag": tag.slug, "role": row.role, "groups": row.groups, "source": via}
            if row.kept_manual:
                continue
            if row.role == MEMBER and tag.members.filter(pk=user.pk).exists():
                tag.members.remove(user)
                result.removed.append(f"member of {tag.slug}")
                _record(
                    AuditEvent.Action.MEMBERSHIP_REMOVED,
                    user=user,
                    actor=actor,
                    summary=f"{user.get_username()} is no longer a member of {tag.name} ({via}: left "
                    f"{', '.join(row.groups) or 'the group'})",
                    data=data,
                    request=request,
                )
            elif row.role == OWNER and tag.owner_id == user.pk:
                successor = _successor(tag, leaving=user)
                tag.owner = successor
                tag.save(update_fields=["owner"])
                result.removed.append(f"owner of {tag.slug}")
                if successor is not None:
                    SyncedMembership.objects.update_or_create(
                        user=successor, tag=tag, role=OWNER, defaults={"groups": row.groups}
                    )
                _record(
                    AuditEvent.Action.TAG_OWNER_CHANGED,
                    user=user,
                    actor=actor,
                    summary=f"{user.get_username()} is no longer the owner of {tag.name} ({via}); "
                    + (f"{successor.get_username()} owns it now" if successor else "it has no owner now"),
                    data={**data, "new_owner": successor.get_username() if successor else None},
                    request=request,
                )

        identity = OIDCIdentity.objects.filter(user=user).first()
        if identity is not None:
            identity.groups = groups
            identity.synced_at = timezone.now()
            identity.sync_error = ""
            identity.save(update_fields=["groups", "synced_at", "sync_error"])
    return result


def reapply_last_known(*, tenant_id: str, actor=None, request=None) -> int:
    """After a mapping changed: sync every person of the tenant with the groups the provider sent
    last. Returns how many people's tags changed."""
    changed = 0
    for identity in OIDCIdentity.objects.filter(user__tenant_id=tenant_id).select_related("user"):
        if sync_user(
            identity.user, identity.groups or [], source="mapping changed", actor=actor, request=request
        ).changed:
            changed += 1
    return changed


# ----------------------------------------------------------------------------------- the provider


class ProviderRefused(Exception):
    """The provider says the person's grant is gone (invalid_grant): disabled, removed, revoked."""


def current_groups(identity: OIDCIdentity) -> list[str]:
    """Ask the provider for the person's groups now, with their refresh token (rotated if the
    provider sends a new one). Raises ProviderRefused on invalid_grant, requests' errors or
    oidc.SignInRefused when the provider cannot be asked or answers with something unusable."""
    from access import oidc

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
    from access import oidc

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
