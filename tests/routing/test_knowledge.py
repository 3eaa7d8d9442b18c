"""Verified knowledge that stays true, end to end: publishing records a VerifiedAnswer (who, when,
relied-on documents and versions, review-by date); a relied-on document replaced or deleted, or the
review date passing, makes it NEEDS_REVIEW (chunks no longer say verified; the setting decides
whether it is still retrieved); the owner re-verifies, edits or retires it. The real chat websocket,
fake Ollama, embedded Qdrant (hashing embedder), the real database."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from documents.models import Document
from routing import knowledge
from routing.models import RoutedQuestion, VerifiedAnswer
from tests.routing.conftest import PARKING_DOC, ask, client_for, low_confidence
from tests.routing.test_routing import get, in_fresh_thread, post

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("drain_turns")]

QUESTION = "What is the visitor parking permit policy for the company garage?"
ANSWER = "Visitors get a day parking permit for the company garage from reception."
FOLLOW_UP = "What is the parking permit policy for visitors?"


def badge_date(at) -> str:
    at = timezone.localtime(at)
    return f"{at.day} {at.strftime('%b %Y')}"


async def publish(asker, owner, fake_ollama) -> VerifiedAnswer:
    """The owner answers a routed question and publishes it; its document is indexed."""
    from documents.tasks import wait_for_background_ingestion

    low_confidence(fake_ollama)
    await ask(asker, QUESTION)
    question = await RoutedQuestion.objects.aget()
    response = await asyncio.to_thread(
        in_fresh_thread,
        lambda: client_for(owner).post(
            reverse("routing:question", args=[question.pk]), {"answer": ANSWER, "publish": "on"}
        ),
    )
    assert response.status_code == 302
    await wait_for_background_ingestion(timeout=30)
    return await VerifiedAnswer.objects.select_related("document", "tag", "verified_by").aget()


async def cite(user, fake_ollama, verified: VerifiedAnswer):
    """Ask again; the model cites the verified document. Returns (session, answer message)."""
    fake_ollama.reply(f"{ANSWER} [SourceId: {verified.document_id}:0]")
    fake_ollama.rating(100)
    return await ask(user, FOLLOW_UP)


async def chunk_metadata(document_id: str) -> list[dict]:
    """The payload metadata of the document's chunks as retrieval returns them."""
    from ragchat import runtime

    service = await runtime.ready_vector_service()
    results = await service.search(FOLLOW_UP, user_tags=["facilities"], tenant_id="default", limit=20)
    return [r.metadata for r in results if r.document_id == str(document_id)]


@sync_to_async
def fresh(verified: VerifiedAnswer) -> VerifiedAnswer:
    return VerifiedAnswer.objects.select_related("document", "verified_by").get(pk=verified.pk)


@sync_to_async
def relied_on_ids(verified: VerifiedAnswer) -> set[str]:
    return {str(pk) for pk in verified.relied_on.values_list("pk", flat=True)}


# ------------------------------------------------------------------------------------- publishing


async def test_publishing_records_verified_knowledge(asker, owner, corpus, fake_ollama, settings):
    verified = await publish(asker, owner, fake_ollama)
    question = await RoutedQuestion.objects.aget()
    assert (verified.question, verified.answer) == (QUESTION, ANSWER)
    assert verified.document_id == question.published_document_id and verified.source_question_id == question.pk
    assert verified.verified_by == owner and verified.verified_at == question.answered_at
    assert verified.tag.slug == "facilities" and verified.status == "verified"
    assert verified.review_by == timezone.localdate(question.answered_at) + timedelta(days=180)
    # Relied on: the question's cited sources that are documents (never its own published document).
    cited = {c["document_id"] for c in question.citations}
    assert PARKING_DOC in cited
    relied = await relied_on_ids(verified)
    assert PARKING_DOC in relied and relied <= cited and str(verified.document_id) not in relied
    assert verified.relied_on_versions[PARKING_DOC] == {"title": "Parking.md", "version": 1}
    # The chunks say verified, with who and which verified answer.
    [meta] = await chunk_metadata(verified.document_id)
    assert meta["verified"] is True and meta["knowledge_status"] == "verified"
    assert meta["verified_answer_id"] == verified.pk and meta["verified_by"] == "Olivia Owner"


# ------------------------------------------------------------------------------------- VERIFIED -> NEEDS_REVIEW


async def test_replacing_a_relied_on_document_makes_it_need_review(
    asker, second_asker, owner, corpus, fake_ollama, settings
):
    from documents.services import document_replace_file

    verified = await publish(asker, owner, fake_ollama)
    session, answer = await cite(second_asker, fake_ollama, verified)
    page = (await get(second_asker, reverse("chat:session", args=[session.pk]))).content.decode()
    assert f"Verified by Olivia Owner, {badge_date(verified.verified_at)}" in page

    parking = await Document.objects.aget(pk=PARKING_DOC)
    await sync_to_async(document_replace_file)(document=parking, data=b"# Parking\n\nNew rules.", filename="p.md")
    verified = await fresh(verified)
    assert verified.status == "needs_review" and verified.needs_review_since is not None
    assert verified.needs_review_reason == "“Parking.md” was replaced by version 2 (verified against version 1)."
    # Not cited as verified any more: the chunks' payload, and the same old answer, at render time.
    [meta] = await chunk_metadata(verified.document_id)
    assert meta["verified"] is False and meta["knowledge_status"] == "needs_review"
    page = (await get(second_asker, reverse("chat:session", args=[session.pk]))).content.decode()
    assert f"Verified by Olivia Owner, {badge_date(verified.verified_at)}" not in page
    assert "Needs review: verified by Olivia Owner" in page
    # The owner's queue lists it with the reason and the changed source.
    inbox = (await get(owner, reverse("routing:inbox"))).content.decode()
    assert "Verified knowledge to re-verify" in inbox and "was replaced by version 2" in inbox
    items = await sync_to_async(lambda: list(knowledge.needs_review_items(owner)))()
    assert [v.pk for v in items] == [verified.pk]
    detail = (await get(owner, reverse("routing:knowledge_detail", args=[verified.pk]))).content.decode()
    assert "Replaced: now v2" in detail and "Parking.md" in detail


async def test_deleting_a_relied_on_document_makes_it_need_review(asker, owner, corpus, fake_ollama):
    from documents.services import document_delete

    verified = await publish(asker, owner, fake_ollama)
    parking = await Document.objects.aget(pk=PARKING_DOC)
    await sync_to_async(document_delete)(document=parking)
    verified = await fresh(verified)
    assert verified.status == "needs_review" and verified.needs_review_reason == "“Parking.md” was deleted."
    # The snapshot keeps the title of what is gone; the relation no longer has it.
    assert verified.relied_on_versions[PARKING_DOC]["title"] == "Parking.md"
    assert PARKING_DOC not in await relied_on_ids(verified)
    sources = await sync_to_async(knowledge.sources_of)(verified)
    assert {"id": PARKING_DOC, "title": "Parking.md", "version": 1, "now": None, "state": "deleted"} in sources
    [meta] = await chunk_metadata(verified.document_id)
    assert meta["verified"] is False


async def test_marking_a_relied_on_document_outdated_makes_it_need_review(asker, owner, corpus, fake_ollama):
    from documents.services import document_mark_outdated

    verified = await publish(asker, owner, fake_ollama)
    parking = await Document.objects.aget(pk=PARKING_DOC)
    await sync_to_async(document_mark_outdated)(document=parking, user=owner, note="The garage moved in May.")
    verified = await fresh(verified)
    assert verified.status == "needs_review"
    assert verified.needs_review_reason == "“Parking.md” was marked outdated: The garage moved in May."
    [meta] = await chunk_metadata(verified.document_id)
    assert meta["verified"] is False
    # A verified answer's own document marked outdated (it was cited and down-voted): it needs review.
    await sync_to_async(knowledge.reverify)(verified=verified, user=owner)
    own = await Document.objects.aget(pk=verified.document_id)
    await sync_to_async(document_mark_outdated)(document=own, user=owner, note="Superseded.")
    verified = await fresh(verified)
    assert verified.status == "needs_review" and verified.needs_review_reason == "It was marked outdated: Superseded."


async def test_review_date_passing_makes_it_need_review(asker, owner, corpus, fake_ollama, capsys):
    from documents.schedule import run_schedule_once

    verified = await publish(asker, owner, fake_ollama)
    today = timezone.localdate()
    # Not due yet: nothing changes.
    await sync_to_async(call_command)("review_knowledge", today=verified.review_by.isoformat())
    assert (await fresh(verified)).status == "verified"
    await VerifiedAnswer.objects.filter(pk=verified.pk).aupdate(review_by=today - timedelta(days=1))
    # The server's schedule runs the check each round (with the sources).
    done = await sync_to_async(run_schedule_once)()
    assert done["knowledge_review_due"] == 1
    verified = await fresh(verified)
    assert verified.status == "needs_review"
    due = today - timedelta(days=1)
    assert verified.needs_review_reason == f"Its review date ({due.day} {due:%b %Y}) has passed."
    # Idempotent: the cron command finds nothing more.
    await sync_to_async(call_command)("review_knowledge")
    assert "0 verified answers now need review." in capsys.readouterr().out
    [meta] = await chunk_metadata(verified.document_id)
    assert meta["knowledge_status"] == "needs_review"


async def test_the_listener_hears_each_status_change(asker, owner, corpus, fake_ollama):
    heard: list[int] = []

    def listener(verified):
        heard.append((verified.pk, verified.status))

    knowledge.status_listen(listener)
    try:
        verified = await publish(asker, owner, fake_ollama)
        await sync_to_async(knowledge.mark_needs_review)(verified=verified, reason="Test reason.")
        await sync_to_async(knowledge.mark_needs_review)(verified=verified, reason="Again.")  # not VERIFIED: no-op
        assert heard == [(verified.pk, "needs_review")]
        assert (await fresh(verified)).needs_review_reason == "Test reason."
    finally:
        knowledge._listeners.remove(listener)


async def test_needs_review_is_left_out_of_retrieval_when_the_setting_says_so(
    asker, second_asker, owner, corpus, fake_ollama, settings
):
    from ragchat import runtime

    verified = await publish(asker, owner, fake_ollama)
    await sync_to_async(knowledge.mark_needs_review)(verified=verified, reason="A source changed.")
    # Default: still retrieved and cited, as "needs review".
    _, answer = await cite(second_asker, fake_ollama, verified)
    assert str(verified.document_id) in [p["document_id"] for p in answer.passages]
    assert answer.citations[0]["metadata"]["knowledge_status"] == "needs_review"

    settings.RAG = replace(settings.RAG, rag_needs_review_cited=False)
    await sync_to_async(runtime.reset)()
    _, answer = await cite(second_asker, fake_ollama, verified)
    assert str(verified.document_id) not in [p["document_id"] for p in answer.passages]
    # The search itself leaves it out, and only it: the rest of the tag is still found.
    service = await runtime.ready_vector_service()
    found = {r.document_id for r in await service.search(QUESTION, user_tags=["facilities"], limit=20)}
    assert PARKING_DOC in found and str(verified.document_id) not in found

    # Re-verified: retrieved again.
    await post(owner, reverse("routing:knowledge_reverify", args=[verified.pk]))
    _, answer = await cite(second_asker, fake_ollama, verified)
    assert str(verified.document_id) in [p["document_id"] for p in answer.passages]


# ------------------------------------------------------------------------------------- the owner's actions


async def test_reverify_refreshes_who_when_and_the_relied_on_versions(
    asker, second_asker, owner, admin_user, corpus, fake_ollama
):
    from documents.services import document_replace_file

    verified = await publish(asker, owner, fake_ollama)
    session, _ = await cite(second_asker, fake_ollama, verified)
    parking = await Document.objects.aget(pk=PARKING_DOC)
    await sync_to_async(document_replace_file)(document=parking, data=b"# Parking\n\nNew rules.", filename="p.md")
    before = await fresh(verified)
    assert before.status == "needs_review"

    response = await post(admin_user, reverse("routing:knowledge_reverify", args=[verified.pk]))
    assert response.status_code == 302
    verified = await fresh(verified)
    assert verified.status == "verified" and verified.verified_by == admin_user
    assert verified.verified_at > before.verified_at and not verified.needs_review_reason
    assert verified.review_by == timezone.localdate() + timedelta(days=180)
    assert verified.relied_on_versions[PARKING_DOC]["version"] == 2
    [meta] = await chunk_metadata(verified.document_id)
    assert meta["verified"] is True and meta["verified_by"] == "root"
    # The old answer's card follows: verified by the admin, today.
    page = (await get(second_asker, reverse("chat:session", args=[session.pk]))).content.decode()
    assert f"Verified by root, {badge_date(verified.verified_at)}" in page


async def test_edit_republishes_the_text_and_verifies_it(asker, owner, corpus, fake_ollama):
    from documents.tasks import wait_for_background_ingestion

    verified = await publish(asker, owner, fake_ollama)
    await sync_to_async(knowledge.mark_needs_review)(verified=verified, reason="A source changed.")
    url = reverse("routing:knowledge_detail", args=[verified.pk])
    refused = await post(owner, url, {"question": QUESTION, "answer": "  "})
    assert refused.status_code == 200 and "This field is required." in refused.content.decode()
    assert (await fresh(verified)).answer == ANSWER

    new_answer = "Visitors now book a garage permit online; reception no longer hands them out."
    response = await asyncio.to_thread(
        in_fresh_thread, lambda: client_for(owner).post(url, {"question": QUESTION, "answer": new_answer})
    )
    assert response.status_code == 302
    await wait_for_background_ingestion(timeout=30)
    verified = await fresh(verified)
    assert verified.status == "verified" and verified.answer == new_answer
    document = verified.document
    assert document.version == 2 and document.status == "ready", document.error
    from ragchat import runtime

    service = await runtime.ready_vector_service()
    results = await service.search(new_answer, user_tags=["facilities"], limit=20)
    [hit] = [r for r in results if r.document_id == str(document.pk)]
    assert "book a garage permit online" in hit.chunk_text and hit.metadata["verified"] is True


async def test_retire_removes_it_from_retrieval(asker, second_asker, owner, corpus, fake_ollama):
    verified = await publish(asker, owner, fake_ollama)
    session, _ = await cite(second_asker, fake_ollama, verified)
    document_id = str(verified.document_id)
    response = await post(owner, reverse("routing:knowledge_retire", args=[verified.pk]))
    assert response.status_code == 302
    verified = await fresh(verified)
    assert verified.status == "retired" and verified.document_id is None
    assert verified.needs_review_reason == "Retired by Olivia Owner."
    assert not await Document.objects.filter(pk=document_id).aexists()
    from ragchat import runtime

    assert await (await runtime.ready_vector_service()).count(document_id=document_id) == 0
    # The old answer that cited it says so; the queue and the list show it as retired.
    page = (await get(second_asker, reverse("chat:session", args=[session.pk]))).content.decode()
    assert "Retired by its owner" in page and "✓ Verified by" not in page
    listing = (await get(owner, reverse("routing:knowledge") + "?status=retired")).content.decode()
    assert QUESTION in listing
    assert QUESTION not in (await get(owner, reverse("routing:knowledge") + "?status=verified")).content.decode()
    # Nothing more to do with it.
    again = await post(owner, reverse("routing:knowledge_reverify", args=[verified.pk]), follow=True)
    assert "A retired answer cannot be re-verified" in again.content.decode()


async def test_another_owners_verified_answer_is_a_404(asker, owner, stranger, admin_user, corpus, fake_ollama, tags):
    from documents.models import Tag

    verified = await publish(asker, owner, fake_ollama)
    # The stranger owns another tag: they have an inbox, but not this answer.
    await Tag.objects.acreate(name="Other", slug="other", owner=stranger)
    for url in (
        reverse("routing:knowledge_detail", args=[verified.pk]),
        reverse("routing:knowledge_detail", args=["999999"]),
    ):
        assert (await get(stranger, url)).status_code == 404
    for name in ("routing:knowledge_reverify", "routing:knowledge_retire", "routing:knowledge_detail"):
        response = await post(stranger, reverse(name, args=[verified.pk]), {"question": "x", "answer": "y"})
        assert response.status_code == 404
    assert (await fresh(verified)).status == "verified" and (await fresh(verified)).answer == ANSWER
    listing = (await get(stranger, reverse("routing:knowledge"))).content.decode()
    assert QUESTION not in listing
    assert (await get(asker, reverse("routing:knowledge"))).status_code == 404  # no tags: no queue
    assert QUESTION in (await get(admin_user, reverse("routing:knowledge"))).content.decode()
