"""The data migration that records verified knowledge for answers published before it existed."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

BEFORE = [("routing", "0002_knowledge_loop")]
AFTER = [("routing", "0003_verified_answers_of_published")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_published_answers_get_a_verified_answer_once(rag_runtime):
    apps = _migrate(BEFORE)
    User = apps.get_model("ragchat", "User")
    Tag = apps.get_model("documents", "Tag")
    Document = apps.get_model("documents", "Document")
    Session = apps.get_model("chat", "ChatSession")
    RoutedQuestion = apps.get_model("routing", "RoutedQuestion")
    owner = User.objects.create(username="olivia", first_name="Olivia", last_name="Owner")
    asker = User.objects.create(username="erin")
    tag = Tag.objects.create(name="Facilities", slug="facilities", owner=owner, review_days=30)

    def document(title, version=1, **extra):
        return Document.objects.create(
            id=uuid.uuid4(),
            title=title,
            original_filename=f"{title}.md",
            file=f"originals/{title}.md",
            content_hash=uuid.uuid4().hex,
            version=version,
            **extra,
        )

    parking, gone_id = document("Parking", version=3), str(uuid.uuid4())
    published = document("Visitor parking", chunk_metadata={"verified": True, "verified_by": "Olivia Owner"})
    published.tags.add(tag)
    answered_at = timezone.now() - timedelta(days=40)
    session = Session.objects.create(owner=asker)
    common = {
        "asker": asker,
        "session": session,
        "tag": tag,
        "status": "answered",
        "answer": "From reception. ",
        "answered_by": owner,
        "answered_at": answered_at,
        "published_document": published,
    }
    citations = [{"document_id": str(parking.pk)}, {"document_id": gone_id}, {"document_id": str(published.pk)}]
    first = RoutedQuestion.objects.create(question=" Visitor parking? ", citations=citations, **common)
    # A group's other asker shares the published document: still one verified answer.
    RoutedQuestion.objects.create(question="Parking for visitors?", citations=[], **common)
    RoutedQuestion.objects.create(asker=asker, session=session, tag=tag, question="Not published", status="answered")

    apps = _migrate(AFTER)
    VerifiedAnswer = apps.get_model("routing", "VerifiedAnswer")
    [verified] = VerifiedAnswer.objects.all()
    assert (verified.question, verified.answer, verified.status) == ("Visitor parking?", "From reception.", "verified")
    assert verified.source_question_id == first.pk and verified.document_id == published.pk
    assert verified.verified_by_id == owner.pk and verified.verified_at == answered_at
    assert verified.review_by == timezone.localdate(answered_at) + timedelta(days=30)
    # Relied on: the cited documents that exist, never itself; at the version they have now.
    assert [str(d.pk) for d in verified.relied_on.all()] == [str(parking.pk)]
    assert verified.relied_on_versions == {str(parking.pk): {"title": "Parking", "version": 3}}
    meta = apps.get_model("documents", "Document").objects.get(pk=published.pk).chunk_metadata
    assert meta["knowledge_status"] == "verified" and meta["verified_answer_id"] == verified.pk

    # Run again (e.g. after a partial run): nothing doubles.
    _migrate(BEFORE)
    apps = _migrate(AFTER)
    assert apps.get_model("routing", "VerifiedAnswer").objects.count() == 1
    # Its review date passed 10 days ago: the daily check takes it from here.
    from routing.knowledge import review_due

    assert review_due() == 1
    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
