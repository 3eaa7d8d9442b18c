"""Writes for routing: create a routed question (automatic ROUTE or the asker's "ask the owner"),
group it with similar open ones, notify the owner, answer it (delivered into every asker's session),
and publish the answer as verified knowledge.

Who gets a question is the RAG core's rule (ragchat.services.routing.route_target); this module
tells it what the database knows about the tag's owner and stores and announces the result.

Notifications go out after the transaction commits: live on the recipient's channel group
(`user_group_name(user_id)`, joined by the inbox consumer) and by email (Django's email backend).

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import NamedTuple

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from access import policy
from chat import services as chat_services
from chat.models import AnswerFeedback, ChatSession, Message
from documents.models import Document, Tag
from documents.selectors import tag_owner
from ragchat import runtime
from ragchat.dates import shown_datetime
from ragchat.services.rag_service import STRATEGY_SMALLTALK
from ragchat.services.routing import primary_tag, route_target
from ragchat.services.types import SearchResult
from routing import knowledge
from routing.models import REVIEW_REASON_PREFIX, QuestionGroup, RoutedQuestion, VerifiedAnswer
from routing.notifications import (
    Kind,
    absolute_url,
    badges_changed,
    email_people,
    group_send,
    push,
    send_email,
    user_group_name,
)

logger = logging.getLogger(__name__)

DEFAULT_GROUP_SIMILARITY = 0.85


class RoutingError(Exception):
    """The action is refused; the message is for the user."""


class QuestionNotFound(RoutingError):
    """Not the asker's answer / not the user's question: views turn this into a 404."""


def group_similarity() -> float:
    return float(getattr(settings, "ROUTING_GROUP_SIMILARITY", DEFAULT_GROUP_SIMILARITY))


display_name = knowledge.display_name


# ------------------------------------------------------------------------------------- targeting


def _context_tags(message: Message, tenant_id: str) -> list[SearchResult]:
    """The answer's retrieved passages as SearchResults carrying their documents' tags (the chunk
    payload's tags are not kept on the message; the database has them)."""
    passages = list(message.passages or []) or list(message.citations or [])
    doc_ids = {p.get("document_id") for p in passages if isinstance(p, dict) and p.get("document_id")}
    tags_of: dict[str, list[str]] = {}
    rows = Document.objects.filter(id__in=list(doc_ids), tenant_id=tenant_id).values_list("id", "tags__slug")
    for doc_id, slug in rows:
        if slug:
            tags_of.setdefault(str(doc_id), []).append(slug)
    return [
        SearchResult(
            document_id=str(p["document_id"]),
            chunk_index=int(p.get("chunk_index") or 0),
            document_name=str(p.get("document_name") or ""),
            chunk_text="",
            score=float(p.get("relevance_score") or 0.0),
            tags=sorted(tags_of.get(str(p["document_id"]), [])),
        )
        for p in passages
        if isinstance(p, dict) and p.get("document_id")
    ]


def _target_for(*, tag: Tag | None, reason_prefix: str) -> tuple[object | None, bool, str]:
    """(owner user, fallback?, reason) for a tag, decided by the core's rule from the tag's owner as
    the database has it now."""
    route = route_target(
        tag=tag.slug if tag is not None else None,
        owner=tag_owner(tag=tag),
        admin_email=settings.RAG.rag_admin_email,
        reason_prefix=reason_prefix,
    )
    return (None if route.fallback or tag is None else tag.owner), route.fallback, route.reason


def _tag_by_slug(tenant_id: str, slug: str | None) -> Tag | None:
    if not slug:
        return None
    return Tag.objects.filter(tenant_id=tenant_id, slug=slug).select_related("owner").first()


# ------------------------------------------------------------------------------------- grouping


class QueryEmbedding(NamedTuple):
    vector: list[float]  # empty when embedding failed: the question then starts its own group
    model_name: str


def _embed(text: str) -> QueryEmbedding:
    """Call it before opening a transaction: embedding takes a while, and an open write transaction
    holds SQLite's write lock for every other writer meanwhile. A routed answer's query was embedded
    for its search moments ago: the cache has it, and the database thread does not wait for the
    event loop."""
    embedder = runtime.embedder()
    cached = getattr(embedder, "cached_query", None)
    try:
        vector = cached(text) if cached is not None else None
        if vector is None:
            vector = async_to_sync(embedder.embed_query)(text)
    except Exception as e:  # grouping is a convenience: the question is routed on its own
        logger.warning("routing: embedding for grouping failed: %s", e, extra={"event": "routing_embed_failed"})
        return QueryEmbedding([], "")
    return QueryEmbedding([float(v) for v in vector], str(getattr(embedder, "model_name", "") or ""))


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    if not a or not b or len(a) != len(b):
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def group_find_or_create(
    *, tenant_id: str, tag: Tag | None, query: str, embedding: QueryEmbedding
) -> tuple[QuestionGroup, bool]:
    """The open group on the same tag whose representative query is most similar (at least
    ROUTING_GROUP_SIMILARITY), or a new group for this query (`embedding` is the query's).
    Returns (group, created)."""
    vector, model_name = embedding
    threshold = group_similarity()
    best: tuple[float, QuestionGroup] | None = None
    if vector:
        candidates = QuestionGroup.objects.filter(
            tenant_id=tenant_id, status=QuestionGroup.Status.OPEN, embedding_model=model_name
        )
        candidates = candidates.filter(tag=tag) if tag is not None else candidates.filter(tag__isnull=True)
        for group in candidates.order_by("-created_at")[:500]:
            score = cosine(vector, group.embedding)
            if score >= threshold and (best is None or score > best[0]):
                best = (score, group)
    if best is not None:
        return best[1], False
    group = QuestionGroup.objects.create(
        tenant_id=tenant_id, tag=tag, representative_query=query, embedding=vector, embedding_model=model_name
    )
    return group, True


# ------------------------------------------------------------------------------------- creation


def _routable(message: Message) -> bool:
    return (
        message.role == Message.Role.ASSISTANT
        and message.status != Message.Status.STREAMING
        and message.query_strategy != STRATEGY_SMALLTALK
    )


def _snapshot_sources(message: Message) -> list[dict]:
    """What the asker could see: the passages retrieved under their access (cited ones marked)."""
    cited = {c.get("source_id") for c in (message.citations or []) if isinstance(c, dict)}
    seen: set[str] = set()
    sources: list[dict] = []
    for item in list(message.citations or []) + list(message.passages or []):
        if not isinstance(item, dict) or item.get("source_id") in seen:
            continue
        seen.add(item.get("source_id"))
        sources.append({**item, "cited": item.get("source_id") in cited})
    return sources


def _question_and_query(message: Message) -> tuple[str, str]:
    """The asker's words, and the standalone query the answer was retrieved with."""
    question_message = message.reply_to
    question_text = (question_message.content if question_message else "") or message.retrieval_query
    return question_text, message.retrieval_query or question_text


def _create(*, message: Message, origin: str, embedding: QueryEmbedding) -> RoutedQuestion:
    """Runs inside a transaction; `embedding` (of the query) was computed before it opened."""
    session: ChatSession = message.session
    asker = session.owner
    tenant_id = asker.tenant_id
    route = message.route_target or {}
    question_message = message.reply_to
    question_text, query = _question_and_query(message)

    if route and not route.get("fallback") and origin == RoutedQuestion.Origin.ROUTE:
        # The core found an owner with an email; the tag is the route's.
        tag = _tag_by_slug(tenant_id, route.get("tag"))
    else:
        tag = _tag_by_slug(tenant_id, primary_tag(_context_tags(message, tenant_id)))
    prefix = "Asked the owner: " if origin == RoutedQuestion.Origin.MANUAL else ""
    target, fallback, reason = _target_for(tag=tag, reason_prefix=prefix)
    if origin == RoutedQuestion.Origin.ROUTE and route.get("reason"):
        reason = route["reason"] if route.get("fallback") == fallback else reason
    fields = dict(
        message=message,
        question_message=question_message,
        tag=tag,
        target=target,
        fallback=fallback,
        reason=reason[:300],
        origin=origin,
        question=question_text,
        contextual_query=query,
        citations=_snapshot_sources(message),
        draft=message.content,
        confidence=dict(message.confidence or {}),
    )
    review = _open_review_of_question(message)
    if review is not None:
        # One question, one item: the asker down-voted an answer to this question and now it goes
        # to a person. The open review item becomes the question: it keeps its down vote, its row
        # and its place in the inbox (no group, so open inboxes re-render that same row).
        previous = list(recipients_for(review))
        for name, value in fields.items():
            setattr(review, name, value)
        review.save(update_fields=list(fields))
        question, new_group = review, False
        # Inboxes that showed it re-render the row (or drop it, if it went to somebody else now).
        transaction.on_commit(lambda: [_inbox_changed_for(u.pk, question.pk) for u in previous])
    else:
        group, new_group = group_find_or_create(tenant_id=tenant_id, tag=tag, query=query, embedding=embedding)
        question = RoutedQuestion.objects.create(
            tenant_id=tenant_id, asker=asker, session=session, group=group, **fields
        )
    logger.info(
        "question routed",
        extra={"event": "question_routed", "question_id": question.pk, "fallback": fallback, "origin": origin},
    )
    transaction.on_commit(lambda: notify_new_question(question_id=question.pk, email=new_group))
    # The asker's page names who it went to (the answer was shown before routing decided).
    chat_services.message_push(message=message)
    return question


def _open_review_of_question(message: Message) -> RoutedQuestion | None:
    """The open review item (locked) of a down vote on this answer, or on another of the
    assistant's answers to the same question (a regenerated one)."""
    same = Q(message=message)
    if message.reply_to_id is not None:
        same |= Q(question_message_id=message.reply_to_id, message__role=Message.Role.ASSISTANT)
    return (
        RoutedQuestion.objects.select_for_update()
        .filter(same, origin=RoutedQuestion.Origin.FEEDBACK, status=RoutedQuestion.Status.OPEN)
        .order_by("created_at", "id")
        .first()
    )


def routed_of(message: Message) -> RoutedQuestion | None:
    """The routed question of an answer (automatic or "ask the owner"); review items are not one.
    One question, one routed question: the assistant's regenerated answer to a question that was
    routed has its question's (the first), and is never routed again."""
    routed = RoutedQuestion.objects.exclude(origin=RoutedQuestion.Origin.FEEDBACK)
    found = routed.filter(message=message).first()
    if found is None and message.role == Message.Role.ASSISTANT and message.reply_to_id is not None:
        found = routed.filter(question_message_id=message.reply_to_id).order_by("created_at", "id").first()
    return found


def question_route(*, message: Message) -> RoutedQuestion | None:
    """For a finished ROUTE answer: route its question to the tag owner (or the admins). Greetings,
    CITE answers and failed turns are not routed; routing the same answer twice returns the first."""
    if message.action != "ROUTE" or message.status != Message.Status.COMPLETE or not _routable(message):
        return None
    existing = routed_of(message)
    if existing is not None:
        return existing
    embedding = _embed(_question_and_query(message)[1])
    with transaction.atomic():
        return _create(message=message, origin=RoutedQuestion.Origin.ROUTE, embedding=embedding)


def question_escalate(*, user, message: Message) -> RoutedQuestion:
    """The asker's one-click "ask the owner" on any answer of theirs (idempotent per answer)."""
    if not policy.may_escalate(user=user, message=message):
        raise QuestionNotFound("No such answer.")
    if not _routable(message):
        raise RoutingError("This reply cannot be sent to an owner.")
    existing = routed_of(message)
    if existing is not None:
        return existing
    embedding = _embed(_question_and_query(message)[1])
    with transaction.atomic():
        return _create(message=message, origin=RoutedQuestion.Origin.MANUAL, embedding=embedding)


# ------------------------------------------------------------------------------------- feedback (review items)

WITHDRAWN_NOTE = "Withdrawn by the asker."


def _review_tag(message: Message, tenant_id: str) -> Tag | None:
    """The tag a review of this answer goes to: for the assistant's answer, the primary tag of its
    context, as routing decides it; for a person's answer, the tag its routed question was on."""
    if message.role == Message.Role.OWNER:
        answered = (
            RoutedQuestion.objects.filter(answer_message=message, tenant_id=tenant_id).select_related("tag").first()
        )
        if answered is not None:
            return answered.tag
    return _tag_by_slug(tenant_id, primary_tag(_context_tags(message, tenant_id)))


def _review_create(*, feedback: AnswerFeedback) -> RoutedQuestion:
    """A review item for a down vote with a reason: a RoutedQuestion of origin FEEDBACK, targeted as
    routing targets (the context's primary tag's owner, or the admins), never grouped."""
    message = feedback.message
    session = message.session
    asker = session.owner
    tenant_id = asker.tenant_id
    tag = _review_tag(message, tenant_id)
    target, fallback, reason = _target_for(tag=tag, reason_prefix=REVIEW_REASON_PREFIX)
    question_text, query = _question_and_query(message)
    item = RoutedQuestion.objects.create(
        tenant_id=tenant_id,
        asker=asker,
        session=session,
        message=message,
        question_message=message.reply_to,
        tag=tag,
        target=target,
        fallback=fallback,
        reason=reason[:300],
        origin=RoutedQuestion.Origin.FEEDBACK,
        feedback=feedback,
        question=question_text or "(no question)",
        contextual_query=query,
        citations=_snapshot_sources(message),
        draft=message.content,
        confidence=dict(message.confidence or {}),
    )
    logger.info("review item created", extra={"event": "review_created", "question_id": item.pk, "fallback": fallback})
    transaction.on_commit(lambda: notify_new_question(question_id=item.pk))
    return item


def feedback_vote(*, user, message: Message, vote: int, reason: str = "", comment: str = "") -> AnswerFeedback | None:
    """The asker's vote on an answer: +1, -1 (with a reason it becomes a review item in the tag
    owner's inbox), or 0 to undo. Voting again changes the vote; a changed reason or comment updates
    the open review item. One question, one item: a down vote on the assistant's answer to a question
    already sent to a person (open or answered) goes with that question instead (its page and inbox
    row show it), and taking the vote back takes it off. Undoing a down vote (or turning it up) closes the open review item as
    withdrawn: the owner's time goes to answers people still find wrong, and the item stays on record.
    A withdrawn item reopens if the asker down-votes again with a reason; a resolved one is left as
    the owner resolved it. Returns the feedback (None after an undo)."""
    if not policy.may_give_feedback(user=user, message=message):
        if policy.message_in_own_session(user=user, message_id=message.pk) is None:
            raise QuestionNotFound("No such answer.")
        raise RoutingError("This reply cannot be rated.")
    if vote not in (-1, 0, 1):
        raise RoutingError("Choose helpful or not helpful.")
    reason = (reason or "").strip()
    if reason and reason not in AnswerFeedback.Reason.values:
        raise RoutingError("Choose one of the reasons.")
    comment = (comment or "").strip()
    if len(comment) > 2000:
        raise RoutingError("Keep the comment under 2,000 characters.")
    changed: list[RoutedQuestion] = []
    with transaction.atomic():
        feedback = AnswerFeedback.objects.select_for_update().filter(message=message, user=user).first()
        item = carrier = None  # the vote's review item; the routed question that carries the vote instead
        if feedback is not None:
            linked = RoutedQuestion.objects.select_for_update().filter(feedback=feedback).first()
            if linked is not None and linked.origin == RoutedQuestion.Origin.FEEDBACK:
                item = linked
            else:
                carrier = linked
        if vote != -1 and carrier is not None:
            # The down vote is taken back: the question it was sent with no longer shows it.
            carrier.feedback = None
            carrier.save(update_fields=["feedback"])
            changed.append(carrier)
        if vote != -1:
            if item is not None and item.status == RoutedQuestion.Status.OPEN:
                item.status = RoutedQuestion.Status.CLOSED
                item.resolution_note = WITHDRAWN_NOTE
                item.save(update_fields=["status", "resolution_note"])
                changed.append(item)
            if vote == 0:
                if feedback is not None:
                    # The review item (open or resolved) keeps its record: its feedback link clears.
                    feedback.delete()
                feedback = None
            else:
                feedback, _ = AnswerFeedback.objects.update_or_create(
                    message=message, user=user, defaults={"vote": 1, "reason": "", "comment": ""}
                )
        else:
            if feedback is None:
                feedback = AnswerFeedback(message=message, user=user)
            feedback.vote = -1
            if reason:
                feedback.reason = reason
                feedback.comment = comment
            feedback.save()
            routed = _routed_for_vote(message) if item is None and feedback.reason else None
            if carrier is not None and (routed is None or routed.pk != carrier.pk):
                carrier.feedback = None  # its question was closed since: the vote asks for a review
                carrier.save(update_fields=["feedback"])
                changed.append(carrier)
            if routed is not None:
                # One question, one item: the answer's question already waits for (or got) a
                # person's answer. The down vote goes with it rather than into a second item.
                if routed.feedback_id != feedback.pk:
                    routed.feedback = feedback
                    routed.save(update_fields=["feedback"])
                changed.append(routed)
            elif feedback.reason:
                if item is None:
                    _review_create(feedback=feedback)
                elif item.status == RoutedQuestion.Status.OPEN or (
                    item.status == RoutedQuestion.Status.CLOSED and item.resolution_note == WITHDRAWN_NOTE
                ):
                    # The open (or withdrawn) item reads the feedback's reason and comment: tell its inbox.
                    item.status = RoutedQuestion.Status.OPEN
                    item.resolution_note = ""
                    item.save(update_fields=["status", "resolution_note"])
                    changed.append(item)
    for changed_item in changed:
        transaction.on_commit(lambda q=changed_item: _inbox_changed(q))
    return feedback


def _routed_for_vote(message: Message) -> RoutedQuestion | None:
    """The routed question a down vote on the assistant's answer joins instead of becoming a review
    item: its question's, while it waits for a person or once a person answered it (their answer
    replaced the draft; a down vote on their answer is a review item of its own). A question closed
    without an answer is not one: the down vote then asks for a review."""
    if message.role != Message.Role.ASSISTANT:
        return None
    routed = routed_of(message)
    if routed is None or routed.status == RoutedQuestion.Status.CLOSED:
        return None
    return RoutedQuestion.objects.select_for_update().get(pk=routed.pk)


def _review_item(*, question: RoutedQuestion, user) -> RoutedQuestion:
    """The open review item, locked, for an owner's action on it."""
    if not policy.may_answer(user=user, question=question):
        raise QuestionNotFound("No such question.")
    locked = RoutedQuestion.objects.select_for_update().get(pk=question.pk)
    if locked.origin != RoutedQuestion.Origin.FEEDBACK:
        raise RoutingError("Only a review item can be resolved this way.")
    if locked.status != RoutedQuestion.Status.OPEN:
        raise RoutingError("This review item has already been resolved.")
    return locked


def cited_documents_for(*, question: RoutedQuestion, user):
    """The documents of a review item's sources that this person may read (the ones they may mark
    outdated), in the order they were shown."""
    ids = policy.source_document_ids(question.citations)
    readable = policy.readable_document_ids(user=user, document_ids=ids)
    by_id = {str(d.pk): d for d in Document.objects.filter(id__in=list(readable)).select_related("uploaded_by")}
    return [by_id[i] for i in dict.fromkeys(ids) if i in by_id]


MSG_OUTDATED_NOTE = "Write a note on why it is outdated: it is shown with the warning wherever the document is cited."


def _cited_document(*, question: RoutedQuestion, user, document_id) -> Document:
    document = next(
        (d for d in cited_documents_for(question=question, user=user) if str(d.pk) == str(document_id)), None
    )
    if document is None:
        raise QuestionNotFound("No such document.")
    return document


def review_outdated_effect(*, question: RoutedQuestion, user, document_id) -> tuple[Document, knowledge.OutdatedEffect]:
    """What marking one of a review item's cited documents outdated would do (asked before it is
    done): the document, the verified answers that would need review, the answers citing it. The
    same checks as review_mark_outdated."""
    with transaction.atomic():
        locked = _review_item(question=question, user=user)
        document = _cited_document(question=locked, user=user, document_id=document_id)
    return document, knowledge.outdated_effect(document)


def review_mark_outdated(*, question: RoutedQuestion, user, document_id, note: str = "") -> Document:
    """Resolve a review item by marking one of its cited documents outdated: the document shows a
    warning wherever it is cited, with the note (required), and its uploader is told (email and
    live). The verified answers that relied on it need review (routing.knowledge.document_outdated);
    review_outdated_effect says beforehand what that will be."""
    from documents.services import document_mark_outdated

    note = (note or "").strip()
    with transaction.atomic():
        locked = _review_item(question=question, user=user)
        document = _cited_document(question=locked, user=user, document_id=document_id)
        if not note:
            raise RoutingError(MSG_OUTDATED_NOTE)
        document_mark_outdated(document=document, user=user, note=note)
        locked.status = RoutedQuestion.Status.CLOSED
        locked.resolution = RoutedQuestion.Resolution.OUTDATED
        locked.resolution_note = note
        locked.answered_by = user
        locked.answered_at = timezone.now()
        locked.save(update_fields=["status", "resolution", "resolution_note", "answered_by", "answered_at"])
        transaction.on_commit(lambda: _inbox_changed(locked))
        transaction.on_commit(lambda: notify_outdated(document_id=document.pk, marked_by=user))
    # Open chat pages re-render the down-voted answer: its citation now carries the warning.
    if locked.message_id:
        chat_services.message_push(message=locked.message)
    question.refresh_from_db()
    return document


def review_dismiss(*, question: RoutedQuestion, user, note: str = "") -> RoutedQuestion:
    """Resolve a review item without changing anything (the answer was right). The asker is not
    messaged; their "My questions" page shows it was reviewed, with the note."""
    note = (note or "").strip()
    if not note:
        raise RoutingError("Write a short note on why the answer stands.")
    with transaction.atomic():
        locked = _review_item(question=question, user=user)
        locked.status = RoutedQuestion.Status.CLOSED
        locked.resolution = RoutedQuestion.Resolution.DISMISSED
        locked.resolution_note = note[:2000]
        locked.answered_by = user
        locked.answered_at = timezone.now()
        locked.save(update_fields=["status", "resolution", "resolution_note", "answered_by", "answered_at"])
        transaction.on_commit(lambda: _inbox_changed(locked))
    question.refresh_from_db()
    return question


# ------------------------------------------------------------------------------------- notifications


def recipients_for(question: RoutedQuestion) -> list:
    """Who is told about a new question: the owner, or every active admin of the tenant."""
    if question.target is not None and not question.fallback:
        return [question.target]
    return list(policy.admins_of(tenant_id=question.tenant_id))


class Responsible(NamedTuple):
    users: list
    fallback: bool  # the admins: the tag has no owner who can take it (or there is no tag)


def responsible_for(*, tenant_id: str, tag: Tag | None) -> Responsible:
    """Who answers for a tag's items now (reminders, re-verify items): its owner as the core's
    routing rule decides today (active, with an email), else every active admin of the tenant. A
    person who no longer owns the tag is not among them."""
    owner, fallback, _ = _target_for(tag=tag, reason_prefix="")
    if owner is not None and not fallback:
        return Responsible([owner], False)
    return Responsible(list(policy.admins_of(tenant_id=tenant_id)), True)


def new_item_email(question: RoutedQuestion) -> tuple[Kind, str, str]:
    """(kind, subject, body) of the email announcing a new inbox item: a routed question, or a review
    item (a down-voted answer, origin FEEDBACK). Only the asker's own words are quoted (question,
    reason, comment): what came from documents is on the question page, shown as the reader may see it."""
    topic = question.tag.name if question.tag else "no topic"
    url = absolute_url(reverse("routing:question", args=[question.pk]))
    asker = display_name(question.asker)
    if question.origin == RoutedQuestion.Origin.FEEDBACK:
        feedback = question.feedback
        reason = feedback.get_reason_display() if feedback is not None and feedback.reason else "no reason given"
        comment = (feedback.comment.strip() if feedback is not None else "") or "(no comment)"
        body = (
            f"An answer was down-voted: {asker} found the assistant's answer about {topic} "
            f"{reason.lower()}.\n\n"
            f"Their question:\n{question.question}\n\n"
            f"Reason: {reason}\n"
            f"Comment: {comment}\n\n"
            f"Review it here (correct it, mark a source as outdated, or dismiss it):\n{url}\n"
        )
        return Kind.REVIEWS, f"[ragchat] Answer down-voted: {topic} ({reason.lower()})", body
    body = (
        f"A question was routed to you: {asker} asked a question about {topic} that the assistant "
        f"could not answer with confidence.\n\n"
        f"Question:\n{question.question}\n\n"
        f"Why it came to you: {question.reason_for_people}\n\n"
        f"Answer it here:\n{url}\n"
    )
    return Kind.QUESTIONS, f"[ragchat] New question about {topic}", body


def notify_new_question(*, question_id: int, email: bool = True) -> None:
    """A new inbox item (routed question or review item): live to its recipients' open pages, and by
    email to those who want that kind (the configured admin mailbox when no admin has an address)."""
    question = RoutedQuestion.objects.select_related("target", "tag", "asker", "feedback").get(pk=question_id)
    recipients = recipients_for(question)
    push([u.pk for u in recipients], {"type": "inbox.question", "question_id": question.pk})
    if not email:
        return
    kind, subject, body = new_item_email(question)
    email_people(users=recipients, kind=kind, subject=subject, body=body)
    if question.fallback and not any(u.email for u in recipients):
        # No admin has an address: the configured admin mailbox gets it.
        send_email(subject=subject, body=body, to=[settings.RAG.rag_admin_email])


def _verified_people(verified) -> tuple[list, list]:
    """(who answers for it now and may see it in their re-verify queue; whose badge counts it)."""
    responsible = responsible_for(tenant_id=verified.tenant_id, tag=verified.tag)
    queue = VerifiedAnswer.objects.filter(pk=verified.pk)
    told = [u for u in responsible.users if queue.filter(policy.reverify_filter(user=u)).exists()]
    badges = list(
        dict.fromkeys([u.pk for u in responsible.users] + ([verified.tag.owner_id] if verified.tag.owner_id else []))
    )
    return told, badges


def verified_badges_changed(*, verified_id: int) -> None:
    verified = VerifiedAnswer.objects.select_related("tag", "tag__owner").filter(pk=verified_id).first()
    if verified is not None:
        badges_changed(_verified_people(verified)[1])


def notify_needs_review(*, verified_id: int) -> None:
    """Verified knowledge started needing review: the people who answer for its tag are emailed (a
    review kind of email), if they want it."""
    verified = VerifiedAnswer.objects.select_related("tag", "tag__owner").filter(pk=verified_id).first()
    if verified is None or verified.status != VerifiedAnswer.Status.NEEDS_REVIEW:
        return
    told, _ = _verified_people(verified)
    url = absolute_url(reverse("routing:inbox"))
    body = (
        f"A verified answer about {verified.tag.name} needs review"
        f"{': ' + verified.needs_review_reason if verified.needs_review_reason else ''}.\n"
        f"Until it is re-verified it is not cited as verified knowledge.\n\n"
        f"Question:\n{verified.question}\n\n"
        f"Re-verify, edit or retire it from your inbox:\n{url}\n"
    )
    email_people(
        users=told, kind=Kind.REVIEWS, subject=f"[ragchat] Verified answer needs review: {verified.tag.name}", body=body
    )


def notify_outdated(*, document_id, marked_by) -> None:
    """A document was marked outdated: its uploader is told by email (reviews); live, their open
    document pages re-render its row (documents.services.document_mark_outdated broadcasts it)."""
    document = Document.objects.select_related("uploaded_by").filter(pk=document_id).first()
    if document is None or document.uploaded_by is None:
        return
    url = absolute_url(reverse("documents:detail", args=[document.pk]))
    note = f"Their note:\n{document.outdated_note}\n\n" if document.outdated_note else ""
    body = (
        f"{display_name(marked_by)} marked your document “{document.title}” as outdated after reviewing an answer "
        f"that cited it. It stays searchable, and every answer that cites it shows a warning.\n\n"
        f"{note}"
        f"Upload a current version or clear the mark here:\n{url}\n"
    )
    email_people(
        users=[document.uploaded_by],
        kind=Kind.REVIEWS,
        subject=f"[ragchat] “{document.title}” marked outdated",
        body=body,
    )


def notify_answer(*, question_id: int) -> None:
    question = RoutedQuestion.objects.select_related("asker", "answered_by").get(pk=question_id)
    url = absolute_url(reverse("chat:session", args=[question.session_id]))
    when = shown_datetime(question.answered_at)
    body = (
        f"{display_name(question.answered_by)} answered your question on {when}.\n\n"
        f"Your question:\n{question.question}\n\n"
        f"Answer:\n{question.answer}\n\n"
        f"See it in your chat:\n{url}\n"
    )
    email_people(users=[question.asker], kind=Kind.ANSWERS, subject="[ragchat] Your question was answered", body=body)


def _inbox_changed(question: RoutedQuestion) -> None:
    """Tell every inbox showing this question to re-render (or drop) its row."""
    for user in recipients_for(question):
        _inbox_changed_for(user.pk, question.pk)


def _inbox_changed_for(user_id, question_id) -> None:
    group_send(user_group_name(user_id), {"type": "inbox.question", "question_id": question_id})


# ------------------------------------------------------------------------------------- answering


def question_answer(
    *, question: RoutedQuestion, user, text: str, publish: bool = False, publish_tag: Tag | None = None
) -> list[RoutedQuestion]:
    """Answer a question and every other open one of its group: each asker gets the answer as a
    message in their session (live if open), labelled with who answered, and an email. With
    `publish`, the question and answer also become a verified document on the tag."""
    text = (text or "").strip()
    if not text:
        raise RoutingError("Write an answer first.")
    if not policy.may_answer(user=user, question=question):
        raise QuestionNotFound("No such question.")
    now = timezone.now()
    with transaction.atomic():
        locked = RoutedQuestion.objects.select_for_update().get(pk=question.pk)
        if locked.status != RoutedQuestion.Status.OPEN:
            raise RoutingError("This question has already been answered or closed.")
        group_ids = [locked.pk]
        if locked.group_id is not None:
            group_ids = list(
                RoutedQuestion.objects.select_for_update()
                .filter(group_id=locked.group_id, status=RoutedQuestion.Status.OPEN)
                .values_list("pk", flat=True)
            )
        answered: list[RoutedQuestion] = []
        delivered: dict[tuple, Message] = {}  # one answer per asker's question, however many items it had
        for item in RoutedQuestion.objects.filter(pk__in=_with_same_question(group_ids)).select_related(
            "session", "question_message", "message"
        ):
            key = (item.session_id, item.question_message_id or f"item {item.pk}")
            message = delivered.get(key)
            if message is None:
                message = chat_services.message_create_owner_answer(
                    session=item.session, author=user, content=text, reply_to=item.question_message
                )
                delivered[key] = message
                chat_services.message_push(message=message)
                transaction.on_commit(lambda pk=item.pk: notify_answer(question_id=pk))
            item.status = RoutedQuestion.Status.ANSWERED
            # A review item's answer corrects the answer that was down-voted.
            item.resolution = (
                RoutedQuestion.Resolution.CORRECTED
                if item.origin == RoutedQuestion.Origin.FEEDBACK
                else RoutedQuestion.Resolution.ANSWERED
            )
            item.answer = text
            item.answered_by = user
            item.answered_at = now
            item.answer_message = message
            item.seen_at = None
            item.save(
                update_fields=[
                    "status",
                    "resolution",
                    "answer",
                    "answered_by",
                    "answered_at",
                    "answer_message",
                    "seen_at",
                ]
            )
            if item.message_id:
                # The draft it answers stops saying "unverified until they answer", live.
                chat_services.message_push(message=item.message)
            transaction.on_commit(lambda asker=item.asker_id: nav_badges_changed(asker))
            transaction.on_commit(lambda q=item: _inbox_changed(q))
            answered.append(item)
        if locked.group_id is not None:
            QuestionGroup.objects.filter(pk=locked.group_id).update(
                status=QuestionGroup.Status.ANSWERED, answered_at=now
            )
    question.refresh_from_db()
    if publish:
        question_publish(question=question, user=user, tag=publish_tag)
    return answered


def _with_same_question(ids: list[int]) -> list[int]:
    """These items (locked, inside the caller's transaction) and every other open item of the same
    asker's question: a routed question and a review item of the same answer, or of another
    version of it, are one question, and one answer settles them all."""
    same = Q()
    for question_message_id, message_id in RoutedQuestion.objects.filter(pk__in=ids).values_list(
        "question_message_id", "message_id"
    ):
        if question_message_id is not None:
            same |= Q(question_message_id=question_message_id)
        if message_id is not None:
            same |= Q(message_id=message_id)
    if not same:
        return list(ids)
    others = RoutedQuestion.objects.select_for_update().filter(same, status=RoutedQuestion.Status.OPEN)
    return list(dict.fromkeys([*ids, *others.values_list("pk", flat=True)]))


def question_close(*, question: RoutedQuestion, user) -> RoutedQuestion:
    """Close without an answer (spam, duplicate, nothing to say)."""
    if not policy.may_answer(user=user, question=question):
        raise QuestionNotFound("No such question.")
    RoutedQuestion.objects.filter(pk=question.pk, status=RoutedQuestion.Status.OPEN).update(
        status=RoutedQuestion.Status.CLOSED
    )
    question.refresh_from_db()
    if (
        question.group_id is not None
        and not question.group.questions.filter(status=RoutedQuestion.Status.OPEN).exists()
    ):
        QuestionGroup.objects.filter(pk=question.group_id).update(status=QuestionGroup.Status.CLOSED)
    transaction.on_commit(lambda: _inbox_changed(question))
    return question


def question_publish(*, question: RoutedQuestion, user, tag: Tag | None = None) -> Document:
    """Publish an answered question as a verified document scoped to its tag (R-ROUTE-5), and
    record it as verified knowledge (routing.knowledge: who, when, the documents it relied on, a
    review-by date). It is uploaded and ingested like any document; its chunks carry verified /
    verified_by / verified_at / knowledge_status, which citations expose in Citation.metadata."""
    from documents.services import UploadRefused, document_create
    from documents.tasks import ingestion_enqueue

    if not policy.may_answer(user=user, question=question):
        raise QuestionNotFound("No such question.")
    if question.status != RoutedQuestion.Status.ANSWERED or not question.answer:
        raise RoutingError("Answer the question before publishing it.")
    if question.published_document_id is not None:
        raise RoutingError("This answer is already published.")
    tag = tag or question.tag
    if tag is None:
        raise RoutingError("Choose the tag to publish this answer under.")
    data = knowledge.knowledge_text(question=question.question, answer=question.answer).encode()
    with transaction.atomic():
        try:
            document = document_create(user=user, data=data, filename=f"verified-answer-{question.pk}.md", tags=[tag])
        except UploadRefused as e:
            raise RoutingError(str(e)) from e
        verified = knowledge.verified_answer_create(question=question, document=document, tag=tag, user=user)
        document.title = question.question.strip()[:300]
        document.chunk_metadata = knowledge.knowledge_metadata(verified)
        document.save(update_fields=["title", "chunk_metadata", "updated_at"])
        RoutedQuestion.objects.filter(pk=question.pk).update(published_document=document)
        if question.group_id is not None:
            RoutedQuestion.objects.filter(group_id=question.group_id, status=RoutedQuestion.Status.ANSWERED).update(
                published_document=document
            )
    question.published_document = document
    transaction.on_commit(lambda: ingestion_enqueue(document.pk))
    logger.info("answer published", extra={"event": "answer_published", "document_id": str(document.pk)})
    return document


def answers_mark_seen(*, user, session: ChatSession) -> int:
    """The asker opened the session: its answered questions no longer count as unread (the badge
    of their other open pages follows)."""
    seen = RoutedQuestion.objects.filter(
        asker=user, session=session, status=RoutedQuestion.Status.ANSWERED, seen_at__isnull=True
    ).update(seen_at=timezone.now())
    if seen:
        transaction.on_commit(lambda: nav_badges_changed(user.pk))
    return seen


def nav_badges_changed(user_id) -> None:
    """Every open page of this person re-counts its navigation badges (ws/nav/, ws/inbox/)."""
    group_send(user_group_name(user_id), {"type": "nav.badges"})
