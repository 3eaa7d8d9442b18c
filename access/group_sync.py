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
each person's refresh token: `access.group_refresh`), and with the last-known groups when an admin
changes a mapping.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from django.apps import apps
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
