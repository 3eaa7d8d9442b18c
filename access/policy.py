"""The access policy: the one place that answers "may this person read, see or act on this?".

Every view, consumer, selector, template context, admin page, management command and API of the
project asks here; no other module decides access. The rules, in one sentence each:

- **Signed in** means an authenticated, active account. Everything else below starts from there.
- **Admin** means an active superuser, and only within their own tenant. Staff status alone grants
  nothing: it is Django's flag for the admin site, which this policy also restricts to admins.
- **Tags held**: the tags a person owns or is a member of, plus their tenant's `public` tag; an
  admin holds every tag of the tenant.
- **Documents**: readable when they carry a held tag (same tenant). Anything derived from a
  document — chunks, snippets, titles, filenames, pages, sections, drafts written from them,
  assistant messages built on them — is shown only to people who may read that document.
- **Managing a document** (retry, re-index, replace, delete): admins, its uploader, or an owner
  of one of its tags. **Uploading** to a tag: admins, and the tag's owner; the same people add,
  crawl and delete the tag's site sources (website imports).
- **Chat sessions and their messages**: their owner only (admins included: a chat is private).
- **Routed questions**: the person it was routed to, the current owner of its tag, and admins.
  What such a viewer sees of the asker's context is decided by `question_context` (see
  docs/access.md for the reasoning).
- **Re-verify queue** (verified knowledge that needs review): the tag's owner; admins also for
  tags no owner can take (`reverify_filter`).
- **Notifications** (emails, reminders, digests, live badges) name only items the person may open:
  the inbox and re-verify rules above.
- **Figures**: a tag owner sees the figures of the tags they own; admins every tag.
- **Websocket groups**: a chat group is joined by the session's owner; the inbox and document
  groups by the signed-in user for themselves, each event re-checked against this policy.

Models are looked up through the app registry rather than imported, so that this module sits below
the apps it rules over without an import cycle (the apps' selectors import this module).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet

from ragchat.services.rag_service import STRATEGY_SMALLTALK
from ragchat.services.vector_store import PUBLIC_TAG as PUBLIC_TAG_SLUG


def _model(label: str):
    return apps.get_model(label)


# ----------------------------------------------------------------------------------- who


def is_signed_in(user) -> bool:
    return bool(user is not None and getattr(user, "is_authenticated", False) and user.is_active)


def is_admin(user) -> bool:
    """The one definition of "admin": an active superuser (of their own tenant)."""
    return bool(is_signed_in(user) and user.is_superuser)


def admins_of(*, tenant_id: str) -> QuerySet:
    """Every admin of a tenant: who receives questions that have no owner."""
    return get_user_model().objects.filter(tenant_id=tenant_id, is_active=True, is_superuser=True)


def tenant_users(*, user) -> QuerySet:
    """The people an admin may pick (e.g. for "view as"): their own tenant's, active or not."""
    if not is_admin(user):
        return get_user_model().objects.none()
    return get_user_model().objects.filter(tenant_id=user.tenant_id).order_by("username")


def may_use_admin_site(user) -> bool:
    return is_admin(user)


# ----------------------------------------------------------------------------------- tags


def readable_tags(*, user) -> QuerySet:
    Tag = _model("documents.Tag")
    if not is_signed_in(user):
        return Tag.objects.none()
    tags = Tag.objects.filter(tenant_id=user.tenant_id)
    if is_admin(user):
        return tags
    return tags.filter(Q(slug=PUBLIC_TAG_SLUG) | Q(owner=user) | Q(members=user)).distinct()


def readable_tag_slugs(*, user) -> list[str]:
    """The slugs of the tags a person holds, "public" always included: the chunk filter's any-of list."""
    if not is_signed_in(user):
        return []
    slugs = set(readable_tags(user=user).values_list("slug", flat=True))
    slugs.add(PUBLIC_TAG_SLUG)
    return sorted(slugs)


def uploadable_tags(*, user) -> QuerySet:
    """Admins may upload to any tag of their tenant, tag owners to the tags they own; members never."""
    Tag = _model("documents.Tag")
    if not is_signed_in(user):
        return Tag.objects.none()
    tags = Tag.objects.filter(tenant_id=user.tenant_id)
    return tags if is_admin(user) else tags.filter(owner=user)


def owned_tags(*, user) -> QuerySet:
    Tag = _model("documents.Tag")
    if not is_signed_in(user):
        return Tag.objects.none()
    return Tag.objects.filter(tenant_id=user.tenant_id, owner=user)


def may_read_tag(*, user, tag) -> bool:
    if tag is None:
        return is_admin(user)
    return readable_tags(user=user).filter(pk=tag.pk).exists()


# ----------------------------------------------------------------------------------- documents


def readable_documents(*, user) -> QuerySet:
    """Every document the person may read (unordered; callers narrow and order)."""
    Document = _model("documents.Document")
    if not is_signed_in(user):
        return Document.objects.none()
    documents = Document.objects.filter(tenant_id=user.tenant_id)
    if is_admin(user):
        return documents
    held = readable_tag_slugs(user=user)
    return Document.objects.filter(
        id__in=documents.filter(tags__slug__in=held, tags__tenant_id=user.tenant_id).values("id")
    )


def _uuid_strings(ids: Iterable[Any]) -> set[str]:
    keys: set[str] = set()
    for raw in ids:
        try:
            keys.add(str(uuid.UUID(str(raw))))
        except (TypeError, ValueError):
            continue
    return keys


def readable_document_ids(*, user, document_ids: Iterable[Any]) -> set[str]:
    """Which of these document ids (strings) the person may read; unknown or malformed ids are not."""
    keys = _uuid_strings(document_ids)
    if not keys:
        return set()
    return {str(pk) for pk in readable_documents(user=user).filter(id__in=keys).values_list("id", flat=True)}


def existing_document_ids(*, document_ids: Iterable[Any]) -> set[str]:
    """Which of these ids still name a document (of any tenant): the rest were deleted."""
    keys = _uuid_strings(document_ids)
    if not keys:
        return set()
    Document = _model("documents.Document")
    return {str(pk) for pk in Document.objects.filter(id__in=keys).values_list("id", flat=True)}


def manageable_document_ids(*, user, document_ids: Iterable[Any]) -> set[str]:
    """Which of these documents the person may retry, re-index, replace or delete, in one query:
    admins every one of their tenant, otherwise the uploader or an owner of one of its tags."""
    keys = _uuid_strings(document_ids)
    if not keys or not is_signed_in(user):
        return set()
    Document = _model("documents.Document")
    documents = Document.objects.filter(tenant_id=user.tenant_id, id__in=keys)
    if not is_admin(user):
        documents = documents.filter(Q(uploaded_by=user) | Q(tags__owner=user))
    return {str(pk) for pk in documents.values_list("id", flat=True).distinct()}


def may_manage_document(*, user, document) -> bool:
    return str(document.pk) in manageable_document_ids(user=user, document_ids=[document.pk])


# ----------------------------------------------------------------------------------- site sources


def manageable_sites(*, user) -> QuerySet:
    """Site sources (website imports) a person may see and run: admins every one of their tenant,
    a tag owner those of the tags they own (as for uploading to the tag); members none."""
    SiteSource = _model("documents.SiteSource")
    if not is_signed_in(user):
        return SiteSource.objects.none()
    sites = SiteSource.objects.filter(tenant_id=user.tenant_id)
    return sites if is_admin(user) else sites.filter(tag__owner=user, tag__tenant_id=user.tenant_id)


def may_manage_site(*, user, site) -> bool:
    return site is not None and manageable_sites(user=user).filter(pk=site.pk).exists()


# ----------------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class SourceView:
    """What a person may see of a list of sources (citation-shaped dicts): the visible ones, in
    order, and how many were withheld."""

    visible: list[dict] = field(default_factory=list)
    withheld: int = 0

    @property
    def all_visible(self) -> bool:
        return self.withheld == 0


def visible_sources(*, user, sources: Sequence[Any] | None, readable: set[str] | None = None) -> SourceView:
    """Sources (snippets, titles, pages, sections) derived from documents the person may read.
    A source whose document is gone, or that names none, is withheld as well: nobody can vouch
    for it any more. `readable` may be passed when the caller already asked for a wider set."""
    items = [s for s in (sources or []) if isinstance(s, dict)]
    if readable is None:
        readable = readable_document_ids(user=user, document_ids=[s.get("document_id") for s in items])
    visible = [s for s in items if str(s.get("document_id") or "") in readable]
    return SourceView(visible=visible, withheld=len(items) - len(visible))


def source_document_ids(sources: Iterable[Any] | None) -> list[str]:
    return [str(s.get("document_id")) for s in (sources or []) if isinstance(s, dict) and s.get("document_id")]


# ----------------------------------------------------------------------------------- chat


def sessions(*, user) -> QuerySet:
    ChatSession = _model("chat.ChatSession")
    if not is_signed_in(user):
        return ChatSession.objects.none()
    return ChatSession.objects.filter(owner=user)


def session_or_none(*, user, session_id):
    """The session when the person owns it, else None (absent and forbidden look alike)."""
    return owned_sessions(user=user, session_ids=[session_id]).get(_session_key(session_id))


def owned_sessions(*, user, session_ids) -> dict[str, Any]:
    """Those of `session_ids` the person owns, by id (as str(UUID)); the others are left out
    (absent and forbidden look alike). One query for a burst of questions."""
    keys = {key for key in map(_session_key, session_ids) if key is not None}
    if not keys:
        return {}
    return {str(session.pk): session for session in sessions(user=user).filter(pk__in=keys)}


def _session_key(session_id) -> str | None:
    try:
        return str(uuid.UUID(str(session_id)))
    except (TypeError, ValueError):
        return None


def message_in_own_session(*, user, message_id):
    """A message of one of the person's own sessions, else None."""
    Message = _model("chat.Message")
    if not is_signed_in(user):
        return None
    try:
        key = int(message_id)
    except (TypeError, ValueError):
        return None
    return Message.objects.filter(pk=key, session__owner=user).select_related("session", "reply_to").first()


# ----------------------------------------------------------------------------------- routing


def visible_questions(*, user) -> QuerySet:
    """Routed questions the person may open: routed to them, on a tag they own, or (admins) any of
    the tenant's."""
    RoutedQuestion = _model("routing.RoutedQuestion")
    if not is_signed_in(user):
        return RoutedQuestion.objects.none()
    questions = RoutedQuestion.objects.filter(tenant_id=user.tenant_id)
    if is_admin(user):
        return questions
    return questions.filter(Q(target=user) | Q(tag__owner=user))


def inbox_filter(*, user) -> Q:
    """The inbox: questions on tags the person owns or routed to them; admins also receive the
    fallback ones (no tag, no owner, owner gone)."""
    mine = Q(target=user) | Q(tag__owner=user)
    if is_admin(user):
        mine |= Q(fallback=True) | Q(target__isnull=True)
    return mine & Q(tenant_id=user.tenant_id)


def reverify_filter(*, user) -> Q:
    """The re-verify queue (verified knowledge that needs review): answers on tags the person owns;
    admins also receive those of tags without an owner who can take them (none, deactivated, or
    without an email: the routing rule's fallback)."""
    mine = Q(tag__owner=user)
    if is_admin(user):
        mine |= Q(tag__owner__isnull=True) | Q(tag__owner__is_active=False) | Q(tag__owner__email="")
    return mine & Q(tenant_id=user.tenant_id)


def has_inbox(*, user) -> bool:
    if not is_signed_in(user):
        return False
    return is_admin(user) or owned_tags(user=user).exists()


def may_answer(*, user, question) -> bool:
    return visible_questions(user=user).filter(pk=question.pk).exists()


def verified_answers(*, user) -> QuerySet:
    """Verified knowledge a person looks after: on the tags they own; admins every tag of the tenant."""
    VerifiedAnswer = _model("routing.VerifiedAnswer")
    if not is_signed_in(user):
        return VerifiedAnswer.objects.none()
    answers = VerifiedAnswer.objects.filter(tenant_id=user.tenant_id)
    return answers if is_admin(user) else answers.filter(tag__owner=user)


def may_manage_verified(*, user, verified) -> bool:
    """Re-verify, edit or retire a verified answer: its tag's owner, or an admin."""
    return verified is not None and verified_answers(user=user).filter(pk=verified.pk).exists()


def may_escalate(*, user, message) -> bool:
    """ "Ask the owner" on an answer: only from the asker's own session."""
    return message is not None and is_signed_in(user) and message.session.owner_id == user.pk


def may_give_feedback(*, user, message) -> bool:
    """A vote on an answer: only the asker (sessions are private), only on a finished answer of the
    assistant or a person (not a greeting, a failed or a still streaming one)."""
    Message = _model("chat.Message")
    return (
        message is not None
        and is_signed_in(user)
        and message.session.owner_id == user.pk
        and message.role in (Message.Role.ASSISTANT, Message.Role.OWNER)
        and message.status == Message.Status.COMPLETE
        and message.query_strategy != STRATEGY_SMALLTALK
        and bool(message.content)
    )


def may_clear_outdated(*, user, document) -> bool:
    """Clearing a document's "outdated" mark: an admin, an owner of one of its tags, or whoever set it."""
    if not is_signed_in(user) or document is None or document.tenant_id != user.tenant_id:
        return False
    if is_admin(user) or document.outdated_by_id == user.pk:
        return True
    return document.tags.filter(owner=user).exists()


def figure_tags(*, user) -> QuerySet:
    """Tags whose figures the person sees: the ones they own; admins every tag of the tenant."""
    Tag = _model("documents.Tag")
    if not is_signed_in(user):
        return Tag.objects.none()
    tags = Tag.objects.filter(tenant_id=user.tenant_id).exclude(slug=PUBLIC_TAG_SLUG)
    return tags if is_admin(user) else tags.filter(owner=user)


def may_see_untagged_figures(*, user) -> bool:
    return is_admin(user)


@dataclass(frozen=True)
class ContextEntry:
    """One message of the asker's conversation as a question's viewer may see it: the message, or
    None with the reason it is withheld."""

    message: Any
    withheld_sources: int = 0
    withheld_reason: str = ""

    @property
    def visible(self) -> bool:
        return not self.withheld_reason


@dataclass(frozen=True)
class QuestionContext:
    """What the viewer of a routed question may see of what the assistant had.

    sources: the passages the asker was shown, narrowed to documents the viewer may read.
    draft_visible: the assistant's draft was written from every source it had and with the earlier
        conversation in its prompt (it may repeat an earlier answer); it is shown only when the
        viewer may read all of those sources and sees the whole conversation.
    conversation: each earlier message, or a note that it is withheld.
    contextual_query_visible: the rewritten search query is built from the conversation; it is
        shown only when nothing of the conversation is withheld.
    """

    sources: SourceView
    draft_visible: bool
    conversation: list[ContextEntry]
    contextual_query_visible: bool


def _owner_answer_visible(*, user, tag) -> bool:
    """An earlier answer from a person is shown when the viewer may read the tag it was given
    under (it may quote documents of that tag); untagged ones, or ones of unknown origin, only to
    admins."""
    return may_read_tag(user=user, tag=tag) if tag else is_admin(user)


def question_context(*, user, question, conversation: Sequence[Any]) -> QuestionContext:
    """Decide, for a viewer who may open `question`, what of the asker's context they may see.

    The asker's own words (their questions) are always shown: the viewer needs them to answer.
    Everything that came from documents is shown only where the viewer may read every document it
    came from; what is withheld is counted, never silently dropped.
    """
    RoutedQuestion = _model("routing.RoutedQuestion")
    Message = _model("chat.Message")
    all_ids = set(source_document_ids(question.citations))
    for m in conversation:
        all_ids.update(source_document_ids(m.citations))
        all_ids.update(source_document_ids(m.passages))
    readable = readable_document_ids(user=user, document_ids=all_ids)
    sources = visible_sources(user=user, sources=question.citations, readable=readable)

    owner_messages = [m.pk for m in conversation if m.role == Message.Role.OWNER]
    answered_by_message: dict[int, Any] = {}
    if owner_messages:
        for q in RoutedQuestion.objects.filter(answer_message_id__in=owner_messages).select_related("tag"):
            answered_by_message[q.answer_message_id] = q.tag

    entries: list[ContextEntry] = []
    for m in conversation:
        if m.role == Message.Role.USER:
            entries.append(ContextEntry(message=m))
        elif m.role == Message.Role.OWNER:
            if _owner_answer_visible(user=user, tag=answered_by_message.get(m.pk)):
                entries.append(ContextEntry(message=m))
            else:
                entries.append(
                    ContextEntry(message=None, withheld_reason="an answer given under a tag you do not hold")
                )
        else:
            ids = set(source_document_ids(m.citations)) | set(source_document_ids(m.passages))
            hidden = len(ids - readable)
            if hidden:
                entries.append(
                    ContextEntry(
                        message=None, withheld_sources=hidden, withheld_reason="it drew on documents you may not read"
                    )
                )
            else:
                entries.append(ContextEntry(message=m))
    conversation_clear = all(e.visible for e in entries)
    return QuestionContext(
        sources=sources,
        draft_visible=sources.all_visible and conversation_clear,
        conversation=entries,
        contextual_query_visible=conversation_clear and sources.all_visible,
    )


# ----------------------------------------------------------------------------------- API tokens


def token_user(token, *, now=None):
    """The person a personal access token acts as, or None: revoked, expired, or the account is no
    longer active. A token acts as its person and never more: callers ask this module's other
    functions with the user returned here."""
    from django.utils import timezone

    if token is None or token.revoked_at is not None:
        return None
    if token.expires_at is not None and token.expires_at <= (now or timezone.now()):
        return None
    user = token.user
    return user if is_signed_in(user) else None


def token_may(*, token, scope: str) -> bool:
    """The token is usable and carries the scope (read, chat, upload, answer)."""
    return token_user(token) is not None and scope in (token.scopes or [])


def own_tokens(*, user) -> QuerySet:
    AccessToken = _model("api.AccessToken")
    if not is_signed_in(user):
        return AccessToken.objects.none()
    return AccessToken.objects.filter(user=user)


def tenant_tokens(*, user) -> QuerySet:
    """Every token of the admin's tenant (the admins' token list); nobody else's."""
    AccessToken = _model("api.AccessToken")
    if not is_admin(user):
        return AccessToken.objects.none()
    return AccessToken.objects.filter(user__tenant_id=user.tenant_id)


def revocable_token(*, user, token_id):
    """A token the person may revoke (their own; an admin any of their tenant's), else None."""
    try:
        key = int(token_id)
    except (TypeError, ValueError):
        return None
    mine = own_tokens(user=user).filter(pk=key).first()
    return mine or tenant_tokens(user=user).filter(pk=key).first()


# ----------------------------------------------------------------------------------- audit


def may_read_audit_log(user) -> bool:
    return is_admin(user)


def may_view_as(*, user, subject) -> bool:
    """An admin may preview what another person of their own tenant would retrieve."""
    return is_admin(user) and subject is not None and subject.tenant_id == user.tenant_id
