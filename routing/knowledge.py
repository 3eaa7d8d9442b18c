"""Verified knowledge that stays true (issue 13): the lifecycle of a VerifiedAnswer.

Publishing an answered question (services.question_publish) creates one: who verified it, when, the
documents the answer relied on (the question's cited sources, with the version each had) and a
review-by date (today + the tag's review_days). Every transition is one function here:

- VERIFIED -> NEEDS_REVIEW: a relied-on document is replaced (`documents_replaced`, its version went
  up) or deleted (`document_deleted`), or the review date passed (`review_due`, run by the sources
  schedule and `manage.py review_knowledge`);
- NEEDS_REVIEW/VERIFIED -> VERIFIED: `reverify` (new verified_at/by and review_by, relied-on
  versions refreshed) and `edit` (new question/answer text re-published into the same document);
- any -> RETIRED: `retire` deletes its document with its chunks, so retrieval no longer finds it;
  the VerifiedAnswer row stays with its question and answer for the record.

The published document's chunks carry the status in their payload (`knowledge_metadata`): only a
VERIFIED one says `verified: true`; a NEEDS_REVIEW one says `knowledge_status: needs_review`, which
retrieval leaves out when RAG_NEEDS_REVIEW_CITED is false (the access conditions of the core).

For the notifier: `needs_review_items(user)` lists what waits in a person's re-verify queue, and
`status_listen(callback)` registers a function called (after commit) with every answer whose status changes, e.g. that
has just become NEEDS_REVIEW.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from access import policy
from chat.models import AnswerSource
from documents.models import Document, Tag
from ragchat import runtime
from ragchat.dates import shown_date
from ragchat.services.vector_store.access import KNOWLEDGE_STATUS
from routing.models import RoutedQuestion, VerifiedAnswer

logger = logging.getLogger(__name__)

Status = VerifiedAnswer.Status


class KnowledgeError(Exception):
    """The action is refused; the message is for the user."""


# ------------------------------------------------------------------------------- text and dates


def display_name(user) -> str:
    if user is None:
        return "an administrator"
    return user.get_full_name() or user.username


def knowledge_text(*, question: str, answer: str) -> str:
    """The published document's Markdown: what retrieval finds and cites. The question is its
    heading (each chunk opens with it, so retrieval matches the question's words) and its title; the
    answer is the text. Who verified it and when is not in the text (the model would repeat it after
    it stopped being true): the chunks' payload and the citation badge, read from the database, say it."""
    return f"# {question.strip()}\n\n{answer.strip()}\n"


def knowledge_metadata(verified: VerifiedAnswer) -> dict[str, Any]:
    """The payload every chunk of its document carries: `verified` only while VERIFIED."""
    return {
        "verified": verified.status == Status.VERIFIED,
        "verified_by": display_name(verified.verified_by),
        "verified_by_id": verified.verified_by_id,
        "verified_at": verified.verified_at.date().isoformat(),
        KNOWLEDGE_STATUS: verified.status,
        "verified_answer_id": verified.pk,
        "routed_question_id": verified.source_question_id,
    }


def review_by_for(tag: Tag, *, today: date | None = None) -> date:
    return (today or timezone.localdate()) + timedelta(days=tag.review_days)


def relied_on_for(*, question: RoutedQuestion, exclude: Iterable[Any] = ()) -> list[Document]:
    """The documents an answer relied on: the routed question's cited sources (what the asker was
    shown) that are documents of its tenant, in citation order. Other verified answers count too:
    when one of them is retired or edited, an answer built on it needs a look as well."""
    ids = policy.source_document_ids(question.citations)
    skip = {str(pk) for pk in exclude}
    keys = [i for i in dict.fromkeys(ids) if i not in skip]
    found = {str(d.pk): d for d in Document.objects.filter(id__in=keys, tenant_id=question.tenant_id)}
    return [found[k] for k in keys if k in found]


def _versions(documents: Iterable[Document]) -> dict[str, dict[str, Any]]:
    return {str(d.pk): {"title": d.title, "version": d.version} for d in documents}


def _sync_chunks(verified: VerifiedAnswer) -> None:
    """Write the status into its document's chunk_metadata (kept by any re-index) and, after
    commit, into the payload of the chunks already stored."""
    if verified.document_id is None:
        return
    metadata = knowledge_metadata(verified)
    document = Document.objects.filter(pk=verified.document_id).first()
    if document is None:
        return
    document.chunk_metadata = {**(document.chunk_metadata or {}), **metadata}
    document.save(update_fields=["chunk_metadata", "updated_at"])
    document_id, tenant_id = str(document.pk), document.tenant_id
    transaction.on_commit(lambda: chunks_set_payload(document_id=document_id, tenant_id=tenant_id, payload=metadata))


def chunks_set_payload(*, document_id: str, tenant_id: str, payload: dict[str, Any]) -> int:
    """Update the stored chunks' payload; a store that is down is logged, not raised: the row's
    chunk_metadata has the status, and the next re-index writes it (the badge reads the database)."""

    async def run() -> int:
        vectors = await runtime.ready_vector_service()
        return await vectors.set_document_payload(document_id, payload, tenant_id=tenant_id)

    try:
        return async_to_sync(run)()
    except Exception as e:
        logger.error("could not update the chunks of verified knowledge %s: %s", document_id, e)
        return 0


# ------------------------------------------------------------------------------------- hooks

StatusListener = Callable[[VerifiedAnswer], None]
_listeners: list[StatusListener] = []


def status_listen(callback: StatusListener) -> None:
    """Call `callback(verified_answer)` after commit whenever an answer's status changes: it needs
    review, is re-verified or edited (verified again), or is retired (the notifier's hook point: the
    owners' badges follow, and they are told when it needs review; no model signal, since several
    transitions are conditional updates)."""
    if callback not in _listeners:
        _listeners.append(callback)


def _announce_after_commit(verified_id: int) -> None:
    transaction.on_commit(lambda: _announce(verified_id))


def _announce(verified_id: int) -> None:
    verified = VerifiedAnswer.objects.filter(pk=verified_id).first()
    if verified is None:
        return
    for callback in list(_listeners):
        try:
            callback(verified)
        except Exception:  # telling people must not undo the transition
            logger.exception("needs-review listener failed")


# ------------------------------------------------------------------------------------- create


def verified_answer_create(*, question: RoutedQuestion, document: Document, tag: Tag, user) -> VerifiedAnswer:
    """The VerifiedAnswer of a just-published answer (called by services.question_publish)."""
    verified_by = question.answered_by or user
    at = question.answered_at or timezone.now()
    relied_on = relied_on_for(question=question, exclude=[document.pk])
    verified = VerifiedAnswer.objects.create(
        tenant_id=question.tenant_id,
        tag=tag,
        question=question.question.strip(),
        answer=question.answer.strip(),
        document=document,
        source_question=question,
        verified_by=verified_by,
        verified_at=at,
        review_by=review_by_for(tag, today=timezone.localdate(at)),
        relied_on_versions=_versions(relied_on),
    )
    verified.relied_on.set(relied_on)
    return verified


# ------------------------------------------------------------------------------------- VERIFIED -> NEEDS_REVIEW


def mark_needs_review(*, verified: VerifiedAnswer, reason: str, at: datetime | None = None) -> bool:
    """VERIFIED -> NEEDS_REVIEW with the reason; False when it was not VERIFIED (nothing changes)."""
    at = at or timezone.now()
    with transaction.atomic():
        changed = VerifiedAnswer.objects.filter(pk=verified.pk, status=Status.VERIFIED).update(
            status=Status.NEEDS_REVIEW, needs_review_reason=reason[:300], needs_review_since=at, updated_at=at
        )
        if not changed:
            return False
        verified.refresh_from_db()
        _sync_chunks(verified)
        _announce_after_commit(verified.pk)
    logger.info(
        "verified answer needs review",
        extra={"event": "knowledge_needs_review", "verified_answer_id": verified.pk, "reason": reason},
    )
    return True


def _relying(document: Document) -> QuerySet:
    return VerifiedAnswer.objects.filter(relied_on=document, status=Status.VERIFIED).distinct()


def documents_replaced(*, document: Document) -> int:
    """A document got a new version (a re-upload, a changed synced file or crawled page): every
    VERIFIED answer that relied on an older version of it needs review. Returns how many."""
    marked = 0
    for verified in _relying(document):
        seen = (verified.relied_on_versions or {}).get(str(document.pk)) or {}
        if int(seen.get("version") or 0) >= document.version:
            continue
        title = seen.get("title") or document.title
        reason = f"“{title}” was replaced by version {document.version} (verified against version {seen.get('version', '?')})."
        marked += mark_needs_review(verified=verified, reason=reason)
    return marked


def document_outdated(*, document: Document) -> int:
    """A document was marked outdated (from a review item): every VERIFIED answer that relied on
    it, or that it publishes, needs review. Returns how many."""
    marked = 0
    note = f": {document.outdated_note}" if document.outdated_note else ""
    for verified in _relying(document):
        seen = (verified.relied_on_versions or {}).get(str(document.pk)) or {}
        reason = f"“{seen.get('title') or document.title}” was marked outdated{note}"
        marked += mark_needs_review(verified=verified, reason=reason)
    for verified in _published_by(document):  # itself
        marked += mark_needs_review(verified=verified, reason=f"It was marked outdated{note}")
    return marked


def _published_by(document: Document) -> QuerySet:
    return VerifiedAnswer.objects.filter(document=document, status=Status.VERIFIED)


@dataclass(frozen=True)
class OutdatedEffect:
    """What marking a document outdated will do, said before it is done: the verified answers that
    go to "Needs review" (`document_outdated`'s), and the answers whose citation of it will show
    the warning."""

    verified: list[VerifiedAnswer]
    citing_answers: int


def outdated_effect(document: Document) -> OutdatedEffect:
    verified = list(
        VerifiedAnswer.objects.filter(Q(relied_on=document) | Q(document=document), status=Status.VERIFIED)
        .distinct()
        .select_related("verified_by", "tag")
        .order_by("-verified_at", "-id")
    )
    citing = AnswerSource.objects.filter(document_id=document.pk, cited=True).values("message_id").distinct()
    return OutdatedEffect(verified=verified, citing_answers=citing.count())


def document_deleted(*, document: Document) -> int:
    """A document is being deleted: every VERIFIED answer that relied on it needs review (the title
    stays in relied_on_versions for the owner to see what is gone); a verified answer whose own
    document goes is retired (it can no longer be found)."""
    marked = 0
    for verified in _relying(document):
        seen = (verified.relied_on_versions or {}).get(str(document.pk)) or {}
        reason = f"“{seen.get('title') or document.title}” was deleted."
        marked += mark_needs_review(verified=verified, reason=reason)
    own = VerifiedAnswer.objects.filter(document=document).exclude(status=Status.RETIRED)
    for verified_id in list(own.values_list("pk", flat=True)):
        _announce_after_commit(verified_id)
    own.update(
        status=Status.RETIRED, needs_review_reason="Its published document was deleted.", updated_at=timezone.now()
    )
    return marked


def review_due(*, today: date | None = None) -> int:
    """Every VERIFIED answer whose review-by date has passed needs review. Idempotent: the
    schedule runs it every round, `manage.py review_knowledge` from cron. Returns how many."""
    today = today or timezone.localdate()
    marked = 0
    for verified in VerifiedAnswer.objects.filter(status=Status.VERIFIED, review_by__lt=today):
        reason = f"Its review date ({shown_date(verified.review_by)}) has passed."
        marked += mark_needs_review(verified=verified, reason=reason)
    return marked


# ------------------------------------------------------------------------------------- owner's actions


def _check(user, verified: VerifiedAnswer) -> None:
    if not policy.may_manage_verified(user=user, verified=verified):
        raise VerifiedNotFound("No such verified answer.")


class VerifiedNotFound(KnowledgeError):
    """Not an answer the user looks after: views turn this into a 404."""


def _refresh_verification(verified: VerifiedAnswer, *, user, at: datetime) -> None:
    relied = list(verified.relied_on.all())  # deleted documents left the relation
    verified.verified_by = user
    verified.verified_at = at
    verified.review_by = review_by_for(verified.tag, today=timezone.localdate(at))
    verified.relied_on_versions = _versions(relied)
    verified.status = Status.VERIFIED
    verified.needs_review_reason = ""
    verified.needs_review_since = None
    verified.reminded_at = None


def reverify(*, verified: VerifiedAnswer, user) -> VerifiedAnswer:
    """The owner checked it: VERIFIED again, by them, now; review-by from today; relied-on
    documents are the ones that still exist, at their current versions."""
    _check(user, verified)
    if verified.status == Status.RETIRED:
        raise KnowledgeError("A retired answer cannot be re-verified; publish a new one.")
    if verified.document_id is None:
        raise KnowledgeError("Its published document is gone; edit it to publish it again.")
    with transaction.atomic():
        _refresh_verification(verified, user=user, at=timezone.now())
        verified.save()
        _sync_chunks(verified)
        _announce_after_commit(verified.pk)
    return verified


def edit(*, verified: VerifiedAnswer, user, question: str, answer: str) -> VerifiedAnswer:
    """New question/answer text, re-published into the same document (a new version, re-indexed)
    and verified by the editor now."""
    from documents.services import UploadRefused, document_create, document_replace_file
    from documents.tasks import ingestion_enqueue

    _check(user, verified)
    question, answer = (question or "").strip(), (answer or "").strip()
    if not question or not answer:
        raise KnowledgeError("Write both the question and the answer.")
    if verified.status == Status.RETIRED:
        raise KnowledgeError("A retired answer cannot be edited; publish a new one.")
    document = verified.document
    if document is not None and (question, answer) == (verified.question, verified.answer):
        return reverify(verified=verified, user=user)  # nothing to re-publish: verifying it is all
    if document is not None and document.is_busy and not document.is_stale:
        raise KnowledgeError("Its document is being indexed; try again in a moment.")
    now = timezone.now()
    with transaction.atomic():
        verified.question, verified.answer = question, answer
        _refresh_verification(verified, user=user, at=now)
        data = knowledge_text(question=question, answer=answer).encode()
        filename = f"verified-answer-{verified.source_question_id or verified.pk}.md"
        try:
            if document is None:
                document = document_create(user=user, data=data, filename=filename, tags=[verified.tag])
            else:
                document_replace_file(document=document, data=data, filename=filename)
        except UploadRefused as e:
            raise KnowledgeError(str(e)) from e
        document.title = question[:300]
        document.title_fixed = True
        document.chunk_metadata = {**(document.chunk_metadata or {}), **knowledge_metadata(verified)}
        document.save(update_fields=["title", "title_fixed", "chunk_metadata", "updated_at"])
        verified.document = document
        verified.save()
        document_id = document.pk
        transaction.on_commit(lambda: ingestion_enqueue(document_id))
        _announce_after_commit(verified.pk)
    return verified


def retire(*, verified: VerifiedAnswer, user) -> VerifiedAnswer:
    """RETIRED: its document is deleted with every chunk, so no answer cites it any more; the row
    keeps its question and answer. Old answers that cited it show "Retired" on the citation."""
    from documents.services import delete_problem, document_delete

    _check(user, verified)
    if verified.status == Status.RETIRED:
        return verified
    document = verified.document
    if document is not None:
        if problem := delete_problem(document=document):
            raise KnowledgeError(problem)
        try:
            document_delete(document=document)  # chunks first: the row stays if the store is down
        except Exception as e:
            logger.error("retiring verified answer %s: %s", verified.pk, e)
            raise KnowledgeError("The search index could not be reached; nothing was retired. Try again.") from e
    VerifiedAnswer.objects.filter(pk=verified.pk).update(
        status=Status.RETIRED, needs_review_reason=f"Retired by {display_name(user)}.", updated_at=timezone.now()
    )
    _announce_after_commit(verified.pk)
    verified.refresh_from_db()
    return verified


# ------------------------------------------------------------------------------------- reads


def needs_review_items(user) -> QuerySet:
    """The person's re-verify queue, the longest waiting first: NEEDS_REVIEW answers on the tags
    they own; admins also those of tags no owner can take (`policy.reverify_filter`, the same rule
    as the inbox badge, reminders and digests). Every verified answer an admin may manage is on
    the knowledge list (`policy.verified_answers`)."""
    if not policy.is_signed_in(user):
        return VerifiedAnswer.objects.none()
    return (
        VerifiedAnswer.objects.filter(policy.reverify_filter(user=user), status=Status.NEEDS_REVIEW)
        .select_related("tag", "tag__owner", "verified_by", "document")
        .order_by("needs_review_since", "pk")
    )


def knowledge_for_user(*, user, verified_id) -> VerifiedAnswer:
    """The verified answer if the user looks after it; Http404 otherwise."""
    from django.http import Http404

    try:
        key = int(verified_id)
    except (TypeError, ValueError) as e:
        raise Http404("No such verified answer.") from e
    verified = (
        policy.verified_answers(user=user)
        .select_related("tag", "verified_by", "document", "source_question")
        .filter(pk=key)
        .first()
    )
    if verified is None:
        raise Http404("No such verified answer.")
    return verified


def sources_of(verified: VerifiedAnswer) -> list[dict[str, Any]]:
    """Its relied-on documents as verified, each with what became of it: current, replaced (with
    the version now) or deleted."""
    current = {str(d.pk): d for d in verified.relied_on.all()}
    current.update({str(d.pk): d for d in Document.objects.filter(id__in=list(verified.relied_on_versions or {}))})
    out = []
    for doc_id, seen in (verified.relied_on_versions or {}).items():
        document = current.get(doc_id)
        version = int(seen.get("version") or 0)
        state = "deleted" if document is None else ("replaced" if document.version > version else "current")
        out.append(
            {
                "id": doc_id,
                "title": seen.get("title") or (document.title if document else doc_id),
                "version": version,
                "now": document.version if document is not None else None,
                "state": state,
            }
        )
    return out


def badge_states(citations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Citations with their verified-knowledge metadata as the database has it now (chat renders
    the badge from it): an answer cited last month shows "Needs review" once it does."""
    wanted_ids, doc_ids = set(), set()
    for c in citations:
        meta = c.get("metadata") or {}
        if "verified" not in meta and KNOWLEDGE_STATUS not in meta:
            continue
        if meta.get("verified_answer_id"):
            wanted_ids.add(meta["verified_answer_id"])
        elif c.get("document_id"):
            doc_ids.add(str(c["document_id"]))
    if not wanted_ids and not doc_ids:
        return citations
    rows = list(
        VerifiedAnswer.objects.filter(pk__in=[i for i in wanted_ids if isinstance(i, int)]).select_related(
            "verified_by"
        )
    ) + list(VerifiedAnswer.objects.filter(document_id__in=list(doc_ids)).select_related("verified_by"))
    by_id = {v.pk: v for v in rows}
    by_doc = {str(v.document_id): v for v in rows if v.document_id}
    out = []
    for c in citations:
        meta = c.get("metadata") or {}
        verified = by_id.get(meta.get("verified_answer_id")) or by_doc.get(str(c.get("document_id")))
        if verified is None:
            out.append(c)
            continue
        out.append(
            {
                **c,
                "metadata": {
                    **meta,
                    "verified": verified.status == Status.VERIFIED,
                    "verified_by": display_name(verified.verified_by),
                    "verified_at": shown_date(verified.verified_at),
                    KNOWLEDGE_STATUS: verified.status,
                },
            }
        )
    return out
