"""Reads of documents and tags: the list with its filters and facets, one document, tag owners.

Who may read what is decided by `access.policy` (docs/access.md): these functions narrow and order
what the policy allows, and never decide access themselves.
"""

from __future__ import annotations

import uuid

from asgiref.sync import sync_to_async
from django.db.models import Count, Q, QuerySet
from django.http import Http404

from access import policy
from documents.models import Document, GlossaryTerm, Tag
from ragchat.services.glossary import GlossaryEntry
from ragchat.services.types import TagOwner


def documents_for_user(
    *,
    user,
    tag: str | None = None,
    status: str | None = None,
    kind: str | None = None,
    query: str | None = None,
    source: str | None = None,
) -> QuerySet[Document]:
    """Documents the user may read, newest first, narrowed by tag slug, status, kind, source
    (upload, web, folder) and title text."""
    documents = policy.readable_documents(user=user)
    if tag:
        documents = documents.filter(tags__slug=tag)
    if status:
        documents = documents.filter(status=status)
    if kind:
        documents = documents.filter(kind=kind)
    if source:
        documents = documents.filter(source_kind=source)
    if query:
        documents = documents.filter(
            Q(title__icontains=query) | Q(original_filename__icontains=query) | Q(source_url__icontains=query)
        )
    ids = documents.values("id")
    return (
        Document.objects.filter(id__in=ids)
        .select_related("uploaded_by")
        .prefetch_related("tags")
        .order_by("-created_at")
    )


def document_for_user(*, user, document_id) -> Document:
    """The document if the user may read it; Http404 otherwise (absent and forbidden look the same)."""
    try:
        key = uuid.UUID(str(document_id))
    except ValueError as e:
        raise Http404("No such document.") from e
    document = documents_for_user(user=user).filter(id=key).first()
    if document is None:
        raise Http404("No such document.")
    return document


def tag_facets(*, user, documents: QuerySet[Document]) -> list[dict]:
    """For each tag the user holds: name, slug and how many of `documents` carry it."""
    counts = dict(
        Tag.objects.filter(documents__in=documents.values("id"))
        .values("slug")
        .annotate(n=Count("documents", distinct=True))
        .values_list("slug", "n")
    )
    return [
        {"slug": tag.slug, "name": tag.name, "count": counts.get(tag.slug, 0)}
        for tag in policy.readable_tags(user=user).order_by("name")
    ]


def glossary_entries_for(*, user) -> list[GlossaryEntry]:
    """The glossary terms of the tags the user may read (none for a user who may read none), in a
    fixed order: what ragchat.services.glossary.expand_query is given for this user's questions."""
    terms = (
        GlossaryTerm.objects.filter(tag__in=policy.readable_tags(user=user).values("pk"))
        .select_related("tag")
        .order_by("tag__slug", "term", "pk")
    )
    return [term.entry() for term in terms]


def tag_owner(*, tag: Tag | None) -> TagOwner | None:
    """What the RAG core's routing rule is told about a tag's owner (the rule itself is
    ragchat.services.routing.route_target): None for no tag, user_id None for an ownerless tag,
    email None when the owner's account is inactive or has no email."""
    if tag is None:
        return None
    owner = tag.owner
    if owner is None:
        return TagOwner(user_id=None, email=None)
    email = owner.email if owner.is_active and owner.email else None
    return TagOwner(user_id=str(owner.pk), email=email)


def _tag_owner(tag: str, tenant_id: str) -> TagOwner | None:
    return tag_owner(tag=Tag.objects.filter(tenant_id=tenant_id, slug=tag).select_related("owner").first())


async def tag_owner_lookup(tag: str, tenant_id: str) -> TagOwner | None:
    """The RAG core's owner lookup: None for an unknown tag; user_id None for an ownerless tag;
    email None when the owner's account is inactive (deleted owners are SET_NULL, so ownerless)."""
    return await sync_to_async(_tag_owner, thread_sensitive=True)(tag, tenant_id)


def outdated_marks(*, document_ids) -> dict[str, dict]:
    """{document id: {"note", "at"}} for those of these documents marked outdated, in one query:
    looked up when an answer is rendered (the mark is never stored in the message)."""
    keys = {str(i) for i in document_ids if i}
    if not keys:
        return {}
    valid = []
    for key in keys:
        try:
            valid.append(uuid.UUID(key))
        except ValueError:
            continue
    rows = Document.objects.filter(id__in=valid, outdated_at__isnull=False).values_list(
        "id", "outdated_note", "outdated_at"
    )
    return {str(pk): {"note": note, "at": at} for pk, note, at in rows}


def with_outdated(sources, marks: dict[str, dict] | None = None) -> list[dict]:
    """Citation-shaped dicts, copied, with "outdated" / "outdated_note" where their document is
    marked outdated now (cards and source lists show a warning)."""
    items = [s for s in (sources or []) if isinstance(s, dict)]
    if marks is None:
        marks = outdated_marks(document_ids=[s.get("document_id") for s in items])
    out = []
    for s in items:
        mark = marks.get(str(s.get("document_id") or ""))
        out.append({**s, "outdated": True, "outdated_note": mark["note"]} if mark else s)
    return out
