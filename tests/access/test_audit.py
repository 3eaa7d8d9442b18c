"""The audit log: the events issue 18 asks for are recorded where they happen (tag owners and
members changed in the admin, documents deleted), and the page filters by action, person and date
and exports what it filters as CSV."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from access.audit import audit_record
from access.models import AuditEvent
from documents.models import Document

pytestmark = pytest.mark.django_db


def _admin(world) -> Client:
    client = Client()
    client.force_login(world.users["superuser"])
    return client


def test_tag_owner_and_member_changes_in_the_admin_are_audited(world):
    client = _admin(world)
    alpha = world.tags["alpha"]
    mia, fiona, emma = world.users["member_a"], world.users["owner_b"], world.users["asker"]
    response = client.post(
        f"/admin/documents/tag/{alpha.pk}/change/",
        {
            "name": alpha.name,
            "slug": alpha.slug,
            "description": "",
            "owner": fiona.pk,  # was oscar
            "members": [mia.pk, fiona.pk],  # emma out, fiona in
            "review_days": alpha.review_days,
            "target_hours": alpha.target_hours,
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    owner = AuditEvent.objects.get(action="tag_owner_changed")
    assert owner.summary == "owner of Alpha: oscar → fiona" and owner.actor == world.users["superuser"]
    added = AuditEvent.objects.get(action="membership_added")
    removed = AuditEvent.objects.get(action="membership_removed")
    assert (added.subject, removed.subject) == (fiona, emma)
    assert "by hand" in added.summary and added.data["source"] == "admin"


def test_a_document_deletion_is_audited_with_who_and_what(world, rag_runtime):
    client = Client()
    client.force_login(world.users["owner_a"])
    doc = world.docs["doc_a"]
    response = client.post(f"/documents/{doc.pk}/delete")
    assert response.status_code == 302
    assert not Document.objects.filter(pk=doc.pk).exists()
    event = AuditEvent.objects.get(action="document_deleted")
    assert event.actor == world.users["owner_a"] and event.tenant_id == "default"
    assert doc.title in event.summary and event.data["tags"] == ["alpha"]


def test_the_audit_page_filters_by_action_person_and_date_and_exports_what_it_filters(world):
    root, mia, oscar = world.users["superuser"], world.users["member_a"], world.users["owner_a"]
    for action, actor, subject, summary in (
        ("sign_in", mia, mia, "mia signed in"),
        ("sign_in", oscar, oscar, "oscar signed in"),
        ("membership_removed", None, mia, "mia is no longer a member of Alpha"),
        ("view_as", root, oscar, "=HYPERLINK(evil) viewed as oscar"),
    ):
        audit_record(action=action, tenant_id="default", actor=actor, subject=subject, summary=summary)
    old = audit_record(action="sign_in", tenant_id="default", actor=mia, subject=mia, summary="mia signed in long ago")
    AuditEvent.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=40))
    audit_record(action="sign_in", tenant_id="t2", actor=world.users["other_tenant"], summary="tina signed in")

    client = _admin(world)
    page = client.get("/access/audit/", {"person": "mia"}).content.decode()
    assert "mia signed in" in page and "mia is no longer a member" in page and "oscar signed in" not in page
    assert "tina" not in page  # another tenant's events never
    page = client.get("/access/audit/", {"person": "mia", "action": "sign_in"}).content.decode()
    assert "mia signed in" in page and "no longer a member" not in page
    today = timezone.localdate().isoformat()
    page = client.get("/access/audit/", {"person": "mia", "since": today, "until": today}).content.decode()
    assert "mia signed in" in page and "long ago" not in page
    bad = client.get("/access/audit/", {"since": today, "until": "2000-01-01"})
    assert bad.status_code == 200 and "“From” is after “To”." in bad.content.decode()
    assert "From: Enter a valid date." in client.get("/access/audit/", {"since": "not-a-date"}).content.decode()

    export = client.get("/access/audit/", {"person": "oscar", "format": "csv"})
    assert export["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(export.content.decode())))
    assert rows[0] == ["time", "action", "actor", "subject", "summary", "ip_address", "details"]
    assert sorted(r[1] for r in rows[1:]) == ["sign_in", "view_as"]
    assert [r[4] for r in rows[1:] if r[1] == "view_as"] == ["'=HYPERLINK(evil) viewed as oscar"]
    page = client.get("/access/audit/", {"person": "oscar"}).content.decode()
    assert 'href="?person=oscar&amp;format=csv"' in page  # the export link keeps the filters
