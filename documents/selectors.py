"""Reads: which tags a user holds, which documents they may see, tag owners for routing.

Access rule (R-DOC-5): a user reads a document when they hold one of its tags; holding = member or
owner of the tag, plus the tenant's `public` tag for every signed-in user; superusers hold every
tag of their tenant. Everything is scoped to the user's tenant.
"""
from __future__ import annotations

import uuid

from asgiref.sync import sync_to_async
from django.db.models import Count, Q, QuerySet
from django.http import Http404

from documents.models import PUBLIC_TAG_SLUG, Document, Tag
from ragchat.services.types import TagOwner


def user_is_admin(user) -> bool:
    return bool(user.is_authenticated and user.is_active and user.is_superuser)


def tags_readable_by(*, user) -> QuerySet[Tag]:
    if not user.is_authenticated or not user.is_active:
        return Tag.objects.none()
    tags = Tag.objects.filter(tenant_id=user.tenant_id)
    if user_is_admin(user):
        return tags
    return tags.filter(Q(slug=PUBLIC_TAG_SLUG) | Q(owner=user) | Q(members=user)).distinct()


def user_tag_slugs(*, user) -> list[str]:
    """Slugs of the tags the user holds, always including "public" (the chunk filter's any-of list)."""
    slugs = set(tags_readable_by(user=user).values_list("slug", flat=True))
    if user.is_authenticated and user.is_active:
        slugs.add(PUBLIC_TAG_SLUG)
    return sorted(slugs)


def tags_uploadable_by(*, user) -> QuerySet[Tag]:
    """Admins may upload to any tag of their tenant, tag owners to the tags they own; members never."""
    if not user.is_authenticated or not user.is_active:
        return Tag.objects.none()
    tags = Tag.objects.filter(tenant_id=user.tenant_id)
    return tags if user_is_admin(user) else tags.filter(owner=user)



def user_can_manage_document(*, user, document: Document) -> bool:
    """Retry, re-index, replace, delete: admins, the uploader, or an owner of one of its tags."""
    if not user.is_authenticated or not user.is_active or document.tenant_id != user.tenant_id:
        return False
    if user_is_admin(user) or (document.uploaded_by_id is not None and document.uploaded_by_id == user.pk):
        return True
    return document.tags.filter(owner=user).exists()


def documents_for_user(
    *,
    user,
    tag: str | None = None,
    status: str | None = None,
    kind: str | None = None,
    query: str | None = None,
) -> QuerySet[Document]:
    """Documents the user may read, newest first, narrowed by tag slug, status, kind and title text."""
    if not user.is_authenticated or not user.is_active:
        return Document.objects.none()
    documents = Document.objects.filter(tenant_id=user.tenant_id)
    if not user_is_admin(user):
        documents = documents.filter(tags__slug__in=user_tag_slugs(user=user), tags__tenant_id=user.tenant_id)
    if tag:
        documents = documents.filter(tags__slug=tag)
    if status:
        documents = documents.filter(status=status)
    if kind:
        documents = documents.filter(kind=kind)
    if query:
        documents = documents.filter(Q(title__icontains=query) | Q(original_filename__icontains=query))
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
        for tag in tags_readable_by(user=user).order_by("name")
    ]



def _tag_owner(tag: str, tenant_id: str) -> TagOwner | None:
    row = Tag.objects.filter(tenant_id=tenant_id, slug=tag).select_related("owner").first()
    if row is None:
        return None
    owner = row.owner
    if owner is None:
        return TagOwner(user_id=None, email=None)
    email = owner.email if owner.is_active and owner.email else None
    return TagOwner(user_id=str(owner.pk), email=email)


async def tag_owner_lookup(tag: str, tenant_id: str) -> TagOwner | None:
    """The RAG core's owner lookup: None for an unknown tag; user_id None for an ownerless tag;
    email None when the owner's account is inactive (deleted owners are SET_NULL, so ownerless)."""
    return await sync_to_async(_tag_owner, thread_sensitive=True)(tag, tenant_id)
