"""Verified knowledge for answers published before it was recorded: one VerifiedAnswer per published
document (a group's askers share one), verified by whoever answered, when they answered, due for
review after its tag's review_days; the documents it relied on are the question's cited sources
that still exist, at the version they have now (the version at publishing was not recorded). The
document's chunk_metadata gets the status; the stored chunks keep theirs until re-indexed, and the
citation badge reads the database meanwhile."""

from datetime import timedelta

from django.db import migrations
from django.utils import timezone


def _name(user) -> str:
    if user is None:
        return "an administrator"
    return f"{user.first_name} {user.last_name}".strip() or user.username


def forwards(apps, schema_editor):
    RoutedQuestion = apps.get_model("routing", "RoutedQuestion")
    VerifiedAnswer = apps.get_model("routing", "VerifiedAnswer")
    Document = apps.get_model("documents", "Document")
    done: set = set(VerifiedAnswer.objects.exclude(document=None).values_list("document_id", flat=True))
    questions = (
        RoutedQuestion.objects.exclude(published_document=None)
        .select_related("published_document", "tag", "answered_by")
        .order_by("pk")
    )
    for question in questions:
        document = question.published_document
        if document.pk in done:
            continue
        done.add(document.pk)
        tag = question.tag or document.tags.order_by("pk").first()
        if tag is None:
            continue
        at = question.answered_at or document.created_at
        cited = [str(c.get("document_id")) for c in (question.citations or []) if isinstance(c, dict) and c.get("document_id")]
        relied = list(Document.objects.filter(id__in=[c for c in cited if c != str(document.pk)], tenant_id=question.tenant_id))
        verified = VerifiedAnswer.objects.create(
            tenant_id=question.tenant_id,
            tag=tag,
            question=question.question.strip(),
            answer=question.answer.strip(),
            document=document,
            source_question=question,
            verified_by=question.answered_by,
            verified_at=at,
            review_by=timezone.localdate(at) + timedelta(days=tag.review_days),
            relied_on_versions={str(d.pk): {"title": d.title, "version": d.version} for d in relied},
        )
        verified.relied_on.set(relied)
        document.chunk_metadata = {
            **(document.chunk_metadata or {}),
            "verified": True,
            "verified_by": _name(question.answered_by),
            "verified_at": timezone.localdate(at).isoformat(),
            "knowledge_status": "verified",
            "verified_answer_id": verified.pk,
            "routed_question_id": question.pk,
        }
        document.save(update_fields=["chunk_metadata"])


class Migration(migrations.Migration):
    dependencies = [
        ("routing", "0002_knowledge_loop"),
        ("documents", "0007_knowledge_loop"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
