"""View as, the audit log, and the hardening items of issue 10: DEBUG off by default, the
Content-Security-Policy header, sign-in lockout with a clear message."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from access.models import AuditEvent
from ragchat.services.types import ChunkRecord
from tests.access.conftest import MK_A, MK_B

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


def _index(world) -> None:
    from ragchat import runtime

    records = [
        ChunkRecord(
            document_id=str(world.docs[key].pk),
            chunk_index=0,
            document_name=world.docs[key].title,
            chunk_text=f"Travel policy: economy class for trips under six hours. Reference {marker}.",
            tags=(slug,),
        )
        for key, marker, slug in (("doc_a", MK_A, "alpha"), ("doc_b", MK_B, "beta"))
    ]

    async def upsert():
        service = await runtime.ready_vector_service()
        await service.upsert_chunks(records)

    async_to_sync(upsert)()


def test_view_as_shows_what_a_person_gets_and_why_not_and_is_audited(rag_runtime, world, settings):
    settings.RAG = dataclasses.replace(rag_runtime, rag_min_similarity_score=0.05)
    from ragchat import runtime

    runtime.reset()
    _index(world)
    admin = Client()
    admin.force_login(world.users["superuser"])
    mia = world.users["member_a"]
    response = admin.post("/access/view-as/", {"user": mia.pk, "question": "What is the travel policy for trips?"})
    html = response.content.decode()
    assert response.status_code == 200
    returned, not_returned = html.split('id="not-title"')
    assert MK_A in returned and MK_B not in returned  # Mia holds Alpha, not Beta
    assert MK_B in not_returned and "Needs one of: Beta" in not_returned
    event = AuditEvent.objects.get(action="view_as")
    assert event.actor == world.users["superuser"] and event.subject == mia
    assert str(world.docs["doc_b"].pk) in event.data["not_returned"]
    audit = admin.get("/access/audit/")
    assert "viewed as mia" in audit.content.decode()
    csv = admin.get("/access/audit/", {"format": "csv", "action": "view_as"})
    assert csv["Content-Type"].startswith("text/csv") and "viewed as mia" in csv.content.decode()


def test_view_as_cannot_pick_another_tenants_person(rag_runtime, world):
    admin = Client()
    admin.force_login(world.users["superuser"])
    response = admin.post("/access/view-as/", {"user": world.users["other_tenant"].pk, "question": "Anything?"})
    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    assert not AuditEvent.objects.filter(action="view_as").exists()


def test_pages_carry_a_strict_content_security_policy(world):
    client = Client()
    client.force_login(world.users["asker"])
    for path in ("/accounts/login/", "/", "/documents/"):
        header = client.get(path)["Content-Security-Policy"]
        assert "default-src 'self'" in header and "script-src 'self'" in header
        assert "unsafe-inline" not in header and "unsafe-eval" not in header
        assert "frame-ancestors 'none'" in header


def test_repeated_failed_sign_ins_lock_the_account_with_a_clear_message(world, settings):
    settings.AXES_FAILURE_LIMIT = 3
    client = Client(REMOTE_ADDR="203.0.113.7")
    for _ in range(3):
        response = client.post("/accounts/login/", {"username": "mia", "password": "wrong"})
    response = client.post("/accounts/login/", {"username": "mia", "password": "pw-mia-12345"})
    assert response.status_code == 429
    assert "Too many failed sign-ins" in response.content.decode()
    assert "Try again in 15 minutes" in response.content.decode()
    # Three wrong passwords, then the right one refused during the lockout: four failed sign-ins.
    assert AuditEvent.objects.filter(action="sign_in_failed", subject=world.users["member_a"]).count() == 4
    assert AuditEvent.objects.filter(action="locked_out").exists()
    # Someone else, elsewhere, is not locked out by it.
    other = Client(REMOTE_ADDR="198.51.100.2")
    response = other.post("/accounts/login/", {"username": "oscar", "password": "pw-oscar-12345"})
    assert response.status_code == 302
    assert AuditEvent.objects.filter(action="sign_in", actor=world.users["owner_a"]).exists()


def test_debug_is_off_unless_asked_for_and_make_run_asks():
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_DEBUG"}
    env.update(DJANGO_SETTINGS_MODULE="ragchat.settings", DJANGO_SECRET_KEY="x" * 50)
    code = "import django; django.setup(); from django.conf import settings; print(settings.DEBUG)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr
    plan = subprocess.run(["make", "-n", "-o", "install", "run"], cwd=ROOT, capture_output=True, text=True).stdout
    assert "DJANGO_DEBUG=true .venv/bin/daphne" in plan and "DEBUG is on for this local demo" in plan


def test_an_answer_built_from_a_tag_the_asker_has_lost_is_withheld_in_their_chat(world):
    client = Client()
    client.force_login(world.users["asker"])
    session = world.sessions["s2"]  # its answer cites an Alpha document only
    assert MK_A in client.get(f"/chat/{session.pk}/").content.decode()
    world.tags["alpha"].members.remove(world.users["asker"])
    html = client.get(f"/chat/{session.pk}/").content.decode()
    assert MK_A not in html
    assert "This answer drew on 1 document you no longer have access to" in html


def test_tag_admin_explains_roles_names_people_and_sets_the_tenant(client, django_user_model):
    """Django admin for tags (issue 14): help text for Owner and Members, people by name, the tenant
    the admin's own (shown, never typed); links to it from the documents and inbox pages."""
    from documents.models import Tag

    admin = django_user_model.objects.create_superuser(
        username="ada", password="pw-ada-12345", first_name="Ada", last_name="Admin", tenant_id="acme"
    )
    django_user_model.objects.create_user(username="ivan", first_name="Ivan", last_name="Iverson", tenant_id="acme")
    client.force_login(admin)
    page = client.get("/admin/documents/tag/add/").content.decode()
    assert "answers this tag&#x27;s questions" in page or "answers this tag's questions" in page
    assert "may read this tag" in page
    assert 'name="tenant_id"' not in page  # not typed
    ivan = django_user_model.objects.get(username="ivan")
    assert str(ivan) == "Ivan Iverson (ivan)"
    response = client.post(
        "/admin/documents/tag/add/",
        {"name": "Legal", "slug": "legal", "description": "", "owner": ivan.pk, "review_days": 180, "target_hours": 48},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Tag.objects.get(slug="legal").tenant_id == "acme"
    link = 'href="/admin/documents/tag/"'
    assert link in client.get("/documents/").content.decode()
    assert link in client.get("/routing/inbox/").content.decode()


def test_owner_question_page_renders_the_conversation_like_the_chat(rag_runtime, world):
    """Issue 14: "Conversation before the question" showed raw Markdown and [SourceId: …]; it now
    reads like the chat (rendered, numbered citation cards), for what the viewer may read."""
    from tests.access.test_matrix import client_for

    question = world.questions["rq_b"]
    html = client_for("superuser", world).get(f"/routing/q/{question.pk}/").content.decode()
    conversation = html[html.index('id="conv-title"') : html.index('id="draft-title"')]
    assert "SourceId" not in conversation
    assert 'class="cite-marker"' in conversation and "Use at least 14 characters" in conversation
