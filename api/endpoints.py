"""/api/v1/: the JSON API (django-ninja: routing, pydantic validation and the OpenAPI schema).

Every operation authenticates a personal access token (api.auth.TokenAuth), checks the token's
scope, and then asks `access.policy` as the token's person: a token never reaches more than its
person would on the web pages. Absent and forbidden look alike (404). Errors have one shape
(api.errors). `POST chat` runs the websocket's chat turn (chat.turns.turn_start) and listens to it;
with `Accept: text/event-stream` it streams the turn's tokens as server-sent events.

References: docs/specs/rag-standard-v1.md (GET /search, POST /chat, citation_map, /health enhanced),
docs/specs/rag-llm-service-architecture.md (validated /query, error classes).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import math
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import Http404, HttpRequest, StreamingHttpResponse
from django.http.multipartparser import MultiPartParserError
from django.urls import reverse
from ninja import File, Form, NinjaAPI, Path, Query, Router, Status
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.files import UploadedFile
from ninja.openapi.docs import Swagger

from access import policy
from api import schemas
from api.auth import TokenAuth, rate_check, require_scope
from api.errors import ApiError, error_response, not_found
from chat import selectors as chat_selectors
from chat import services as chat_services
from chat import turn_handover, turn_state, turns
from chat.models import Message
from chat.rendering import source_url, viewer_url
from documents import selectors as doc_selectors
from documents import services as doc_services
from documents.forms import MSG_TAG_NOT_ALLOWED, UploadForm
from documents.models import Document
from documents.tasks import ingestion_enqueue
from ragchat import runtime
from ragchat.bounds import COUNT_MAX, ID_MAX
from ragchat.health import health_report, spec_fields
from ragchat.services import errors as rag_errors
from ragchat.services.citations import make_snippet
from ragchat.services.glossary import expand_query
from routing import selectors as routing_selectors
from routing import services as routing_services

logger = logging.getLogger(__name__)

api = NinjaAPI(
    title="ragchat API",
    version="1",
    description=(
        "Search, chat, documents, sessions and routed questions of ragchat, as the person whose "
        "personal access token calls it (create one at /api/tokens/). Send `Authorization: Bearer rct_…`. "
        'Every error has one shape: `{"code", "message", "request_id"}` (and `details` where a list '
        "helps); absent and not yours look alike (404); over a token's rate limit: 429 with `Retry-After`."
    ),
    auth=TokenAuth(),
    urls_namespace="api",
    docs=Swagger(settings={"persistAuthorization": False, "tryItOutEnabled": False}),
)

ERRORS: dict[int, Any] = {
    400: schemas.Error,  # a body that cannot be read: not JSON, not UTF-8, a broken multipart
    401: schemas.Error,
    403: schemas.Error,
    404: schemas.Error,
    422: schemas.Error,
    429: schemas.Error,
}
PAGE_SIZE_MAX = 100
SEARCH_K_MAX = 50


# ----------------------------------------------------------------------------------- errors


@api.exception_handler(ApiError)
def _api_error(request, exc: ApiError):
    return error_response(request, exc.status, exc.code, exc.message, details=exc.details, headers=exc.headers)


@api.exception_handler(ValidationError)
def _validation_error(request, exc: ValidationError):
    details = [
        {
            "field": ".".join(str(p) for p in e.get("loc", ()) if p not in ("body", "query", "path", "form", "file")),
            "problem": e.get("msg", ""),
        }
        for e in exc.errors
    ]
    summary = "; ".join(f"{d['field']}: {d['problem']}" if d["field"] else d["problem"] for d in details)
    return error_response(
        request, 422, "validation_error", f"{summary}." if summary else "The request is not valid.", details=details
    )


@api.exception_handler(AuthenticationError)
def _unauthorized(request, exc):
    return error_response(
        request,
        401,
        "unauthorized",
        "A valid personal access token is required (Authorization: Bearer rct_…).",
        headers={"WWW-Authenticate": "Bearer"},
    )


@api.exception_handler(Http404)
def _not_found(request, exc):
    return error_response(request, 404, "not_found", str(exc) or "Not found.")


@api.exception_handler(HttpError)
def _http_error(request, exc: HttpError):
    return error_response(request, exc.status_code, "bad_request", str(exc))


@api.exception_handler(MultiPartParserError)
def _unreadable_multipart(request, exc: MultiPartParserError):
    return error_response(request, 400, "bad_request", f"The multipart body cannot be read: {exc}.")


@api.exception_handler(Exception)
def _unexpected(request, exc):
    logger.exception("API request failed", extra={"event": "api_error"})
    return error_response(request, 500, "internal_error", "Something went wrong; the request id helps find out what.")


def _user(request: HttpRequest):
    return request.user


# ----------------------------------------------------------------------------------- shapes


def _link(request, source: dict[str, Any]) -> str:
    url = source_url(source)
    return request.build_absolute_uri(url) if url.startswith("/") else url


def _viewer_link(request, source: dict[str, Any]) -> str:
    url = viewer_url(source)
    return request.build_absolute_uri(url) if url else ""


def _citation_map(request, sources: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        s["source_id"]: {
            "title": s.get("document_name") or "",
            "url": _link(request, s),
            "viewer_url": _viewer_link(request, s),
            "document_id": s.get("document_id") or "",
            "page": s.get("page_number"),
            "section": s.get("section"),
            "snippet": s.get("snippet") or "",
            "score": s.get("relevance_score"),
            "attributed": bool(s.get("attributed")),
        }
        for s in sources
        if s.get("source_id")
    }


def _routed_to(message: Message) -> dict[str, Any] | None:
    if message.action != "ROUTE":
        return None
    target = message.route_target or {}
    routed = routing_services.routed_of(message)  # a regenerated answer's is its question's
    if routed is not None:
        owner = routing_services.display_name(routed.target) if routed.target_id else "an administrator"
        return {
            "owner": owner,
            "tag": routed.tag.slug if routed.tag_id else target.get("tag"),
            "reason": routed.reason or target.get("reason", ""),
            "question_id": routed.pk,
        }
    return {
        "owner": "an administrator" if target.get("fallback") else "the tag owner",
        "tag": target.get("tag"),
        "reason": target.get("reason", ""),
        "question_id": None,
    }


def _answer_payload(request, message: Message, question: str) -> dict[str, Any]:
    """The stored answer as the asker sees it now (sources narrowed by the policy)."""
    [message] = chat_selectors.messages_as_seen_by(user=request.user, messages=[message])
    citations = message.citations or []
    confidence = message.confidence or {}
    return {
        "request_id": message.request_id or request.request_id,
        "session_id": str(message.session_id),
        "message_id": message.pk,
        "question": question,
        "answer": message.content,
        "citations": [c["source_id"] for c in citations],
        "citation_map": _citation_map(request, citations),
        "confidence": {k: confidence.get(k) for k in ("overall", "retrieval", "coverage", "llm")},
        "action": "routed" if message.action == "ROUTE" else "answered",
        "routed_to": _routed_to(message),
        "model": message.model,
        "grounding": _grounding(message),
        "timings": {k: float(v) for k, v in (message.timings or {}).items() if isinstance(v, (int, float))},
    }


def _grounding(message: Message) -> dict[str, Any] | None:
    """The stored grounding check of a message already narrowed by the policy: chunk ids of sources
    the asker may no longer read are left out, like the citations."""
    grounding = message.grounding or {}
    if not grounding.get("sentences"):
        return None
    visible = {s["source_id"] for s in [*(message.citations or []), *(message.passages or [])]}
    sentences = []
    for sentence in grounding["sentences"]:
        by = sentence.get("supported_by")
        sentences.append(
            {
                **sentence,
                "cited": [c for c in sentence.get("cited") or [] if c in visible],
                "attributed": [c for c in sentence.get("attributed") or [] if c in visible],
                "supported_by": by if by in visible else None,
            }
        )
    return {**grounding, "sentences": sentences}


def failure_class(error_type: str) -> tuple[int, str]:
    """A failed turn's status and code, from the stored error's class name (subclasses included):
    the model too slow (504), the search index or embedder down (503), a model not available (422),
    anything else of the model server (502)."""
    error = getattr(rag_errors, error_type or "", None)
    if not (isinstance(error, type) and issubclass(error, rag_errors.RAGServiceError)):
        return 502, "upstream_unavailable"
    if issubclass(error, rag_errors.LLMTimeoutError):
        return 504, "upstream_timeout"
    if issubclass(error, rag_errors.ContextError):
        return 503, "search_unavailable"
    if issubclass(error, (rag_errors.ModelUnavailableError, rag_errors.ModelNotAllowedError)):
        return 422, "unknown_model"
    return 502, "upstream_unavailable"


def _failure(message: Message) -> ApiError:
    status, code = failure_class(message.error_type)
    return ApiError(
        status,
        code,
        message.error or turns.MSG_UNKNOWN,
        details={"session_id": str(message.session_id), "message_id": message.pk, "partial_answer": message.content},
    )


def _document(request, d: Document, *, held: set[str], manageable: set[str]) -> dict[str, Any]:
    return {
        "id": str(d.pk),
        "title": d.title,
        "filename": d.original_filename,
        "status": d.status,
        "stage": d.stage,
        "progress": d.progress,
        "error": d.error,
        "kind": d.kind,
        "size": d.size,
        "pages": d.pages,
        "chunks": d.chunk_count,
        "warnings": [str(w) for w in d.warnings or []],
        "version": d.version,
        "source": d.source_kind,
        "source_url": d.source_url,
        "tags": sorted(t.slug for t in d.tags.all() if t.slug in held),
        "can_manage": str(d.pk) in manageable,
        "url": request.build_absolute_uri(reverse("documents:detail", args=[d.pk])),
        "created_at": d.created_at,
        "indexed_at": d.indexed_at,
    }


def _documents(request, documents) -> list[dict[str, Any]]:
    documents = list(documents)
    held = set(policy.readable_tag_slugs(user=request.user))
    manageable = policy.manageable_document_ids(user=request.user, document_ids=[d.pk for d in documents])
    return [_document(request, d, held=held, manageable=manageable) for d in documents]


def _session(s) -> dict[str, Any]:
    return {
        "id": str(s.pk),
        "title": s.title,
        "created_at": s.created_at,
        "updated_at": s.updated_at,
        "pinned": s.pinned_at is not None,
        "archived": s.archived_at is not None,
    }


# ----------------------------------------------------------------------------------- search

router = Router()


def _search_scope(request, tags: list[str] | None) -> list[str]:
    require_scope(request, "read")
    held = policy.readable_tag_slugs(user=request.user)
    return [t for t in held if t in set(tags)] if tags else held


@router.get(
    "/search",
    response={200: schemas.SearchOut, **ERRORS},
    url_name="search",
    tags=["Search"],
    summary="Search the documents",
    description="Scope `read`. The passages of documents you may read that best match `q` (hybrid search, as the chat retrieves), best first; `tags` narrows to some of your tags.",
)
async def search(
    request,
    q: schemas.QuestionText = Query(
        ..., description="The search text (a question's length: 422 query_too_short / _long)"
    ),
    k: int = Query(5, ge=1, le=SEARCH_K_MAX),
    tags: list[str] | None = Query(None, description="Narrow to these tags (of those you hold)"),
):
    """The chunks the caller may read that best match `q` (the chat's retrieval pipeline: hybrid
    search, quality filter, per-document cap), in the spec's result shape."""
    problem = chat_services.question_problem(q)
    if problem:
        raise ApiError(422, "query_too_short" if "short" in problem else "query_too_long", problem)
    scope = await sync_to_async(_search_scope)(request, tags)
    results = []
    glossary = await sync_to_async(doc_selectors.glossary_entries_for)(user=request.user)
    expanded, glossary_terms = expand_query(q, glossary)
    if scope:
        try:
            await runtime.ready_vector_service()
            results = await runtime.rag_service().get_quality_context(
                expanded, user_tags=scope, tenant_id=request.user.tenant_id, max_chunks=k
            )
        except Exception as e:  # the embedder's or the store's failure, as the chat reports it
            logger.warning("API search failed: %s", e, extra={"event": "api_search_failed"})
            message = turns.error_sentence(e) if isinstance(e, rag_errors.CollectionMismatchError) else turns.MSG_SEARCH
            raise ApiError(503, "search_unavailable", message) from e
    readable = await sync_to_async(policy.readable_document_ids)(
        user=request.user, document_ids=[r.document_id for r in results]
    )
    held = set(scope)
    hits = []
    for r in results:
        if r.document_id not in readable:
            continue
        source = {"document_id": r.document_id, "metadata": r.metadata}
        hits.append(
            {
                "title": r.document_name,
                "snippet": make_snippet(r.chunk_text)[0],
                "score": round(float(r.score), 4),
                "chunk_id": r.source_id,
                "document_id": r.document_id,
                "url": await sync_to_async(_link)(request, source),
                "page": r.page_number,
                "section": r.section,
                "tags": sorted(t for t in r.tags if t in held),
            }
        )
    return {"query": q, "k": k, "results": hits, "glossary_terms": glossary_terms, "request_id": request.request_id}


# ----------------------------------------------------------------------------------- chat


def _chat_prepare(request, body: schemas.ChatIn):
    """Validate, then store the question (new session or an own one): (session, user message)."""
    require_scope(request, "chat")
    rate_check(request, token=request.auth, group="api-chat", rate=settings.RAGCHAT_API_CHAT_RATE)
    problem = chat_services.question_problem(body.question)
    if problem:
        code = "question_too_short" if "too short" in problem else "question_too_long"
        raise ApiError(422, code, problem)
    rag_settings = runtime.rag_settings()
    if body.model and rag_settings.allowlisted_model(body.model) is None:
        raise ApiError(422, "unknown_model", turns.MSG_MODEL, details={"allowed": sorted(rag_settings.models)})
    if body.session_id:
        session = policy.session_or_none(user=request.user, session_id=body.session_id)
        if session is None:
            raise not_found("No such chat session.")
        if turn_handover.session_busy_sync(session.pk):
            raise ApiError(409, "busy", "Please wait until the current answer is finished.")
        return session, chat_services.message_create_user(session=session, content=body.question.strip())
    return chat_services.session_start(user=request.user, question=body.question)


def _wants_stream(request) -> bool:
    return "text/event-stream" in request.headers.get("Accept", "")


def _sse(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data, default=str, ensure_ascii=False)}\n\n"


async def _final_message(queue: asyncio.Queue) -> Message | None:
    while True:
        event = await queue.get()
        if event.kind == "final":
            return event.message
        if event.kind == "closed":
            return None


@router.post(
    "/chat",
    response={
        200: schemas.ChatOut,
        409: schemas.Error,
        502: schemas.Error,
        503: schemas.Error,
        504: schemas.Error,
        **ERRORS,
    },
    url_name="chat",
    tags=["Chat"],
    summary="Ask a question",
    description="Scope `chat`. The chat’s answer with its citations, `citation_map` and confidence; `action` is `routed` (with the owner) when it went to a person. Give `session_id` to continue a chat. With `Accept: text/event-stream` the answer streams as server-sent events.",
    openapi_extra={
        "responses": {
            200: {
                "description": "The answer; with `Accept: text/event-stream`, server-sent events: `start`, "
                "`stage`, `token` (one per model token), then `final` (this object) or `error`.",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            }
        }
    },
)
async def chat(request, body: schemas.ChatIn):
    """The same chat turn as the web chat (chat.turns): stored in the session, routed to the tag
    owner when confidence is low, shown live in any open tab of the session."""
    session, user_message = await sync_to_async(_chat_prepare)(request, body)
    queue: asyncio.Queue = asyncio.Queue()
    start = turns.turn_start(
        session_id=session.pk,
        user=request.user,
        user_message=user_message,
        title=session.title,
        model=body.model,
        request_id=request.request_id,
        listener=queue,
    )
    try:
        # The turn belongs to the process, not to this request: started in a fresh context, it
        # does not use the request's thread-sensitive executor, which ends with the response (a
        # streamed response returns before the turn does).
        turn = await asyncio.create_task(start, context=contextvars.Context())
    except turn_state.TurnInProgress:
        raise ApiError(409, "busy", "Please wait until the current answer is finished.") from None
    question = user_message.content
    if _wants_stream(request):
        return _stream_response(request, queue, turn=turn, question=question)
    message = await _final_message(queue)
    if message is None:
        raise ApiError(502, "upstream_unavailable", turns.MSG_UNKNOWN)
    if message.status != Message.Status.COMPLETE:
        raise _failure(message)
    return await sync_to_async(_answer_payload)(request, message, question)


def _stream_response(request, queue: asyncio.Queue, *, turn, question: str) -> StreamingHttpResponse:
    async def events():
        yield _sse(
            "start", {"request_id": request.request_id, "session_id": turn.session_id, "message_id": turn.message_id}
        )
        while True:
            event = await queue.get()
            if event.kind == "token":
                yield _sse("token", {"text": event.text})
            elif event.kind == "stage":
                yield _sse("stage", {"stage": event.text})
            elif event.kind == "final":
                message = event.message
                if message.status == Message.Status.COMPLETE:
                    yield _sse("final", await sync_to_async(_answer_payload)(request, message, question))
                else:
                    failure = _failure(message)
                    yield _sse(
                        "error",
                        {
                            "code": failure.code,
                            "message": failure.message,
                            "request_id": request.request_id,
                            "details": failure.details,
                        },
                    )
                return
            elif event.kind == "closed":
                yield _sse(
                    "error",
                    {"code": "upstream_unavailable", "message": turns.MSG_UNKNOWN, "request_id": request.request_id},
                )
                return

    response = StreamingHttpResponse(events(), content_type="text/event-stream; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # a proxy must pass tokens on as they come
    return response


# ----------------------------------------------------------------------------------- documents


@router.get(
    "/documents",
    response={200: schemas.DocumentPage, **ERRORS},
    url_name="documents",
    tags=["Documents"],
    summary="List documents",
    description="Scope `read`. Documents you may read, newest first, by tag and status, a page at a time.",
)
def documents_list(
    request,
    tag: schemas.Text | None = None,
    status: Document.Status | None = None,
    page: int = Query(1, ge=1, le=COUNT_MAX),
    page_size: int = Query(25, ge=1, le=PAGE_SIZE_MAX),
):
    """Documents the caller may read, newest first, by tag slug and status."""
    require_scope(request, "read")
    documents = doc_selectors.documents_for_user(user=request.user, tag=tag or None, status=status or None)
    count = documents.count()
    start = (page - 1) * page_size
    return {
        "items": _documents(request, documents[start : start + page_size]),
        "count": count,
        "page": page,
        "pages": max(1, math.ceil(count / page_size)),
    }


@router.post(
    "/documents",
    response={201: schemas.UploadOut, **ERRORS},
    url_name="documents_upload",
    tags=["Documents"],
    summary="Upload documents",
    description="Scope `upload`. Multipart: `files` (one or more) and `tags` (slugs of tags you may upload to). The web page’s rules and messages: each refused file is named with its reason, the others are uploaded and indexed; none uploaded: 422 `upload_refused`. A tag you may not upload to (or no such tag: they look alike): 403 `tag_not_allowed`, nothing uploaded.",
)
def documents_upload(
    request,
    files: list[UploadedFile] = File(..., description="One or more files"),
    tags: list[str] = Form(..., description="Tag slugs (tags you own; admins: any)"),
):
    """Multipart upload with the web page's rules and messages (documents.forms.UploadForm,
    documents.services.document_upload): a file refused is named with the reason; the others go on."""
    require_scope(request, "upload")
    uploadable = policy.uploadable_tags(user=request.user)
    if not uploadable.exists():
        raise not_found("You cannot upload documents.")
    by_slug = dict(uploadable.values_list("slug", "pk"))
    # A slug is looked up among the caller's own tags here: what is not one of them never reaches
    # the form (as a number it would be taken for a tag's id).
    not_allowed = [slug for slug in tags if slug not in by_slug]
    if not_allowed:
        raise ApiError(403, "tag_not_allowed", MSG_TAG_NOT_ALLOWED, details=not_allowed)
    data = {"tags": [str(by_slug[slug]) for slug in tags]}
    form = UploadForm(_querydict(data), request.FILES, tag_choices=uploadable)
    created, refused = [], []
    if form.is_valid():
        for upload in form.cleaned_data["files"]:
            try:
                created.append(
                    doc_services.document_upload(user=request.user, upload=upload, tags=list(form.cleaned_data["tags"]))
                )
            except doc_services.UploadRefused as e:
                refused.append(str(e))
    else:
        refused.extend(form.problems())
    for document in created:
        ingestion_enqueue(document.id)
        document.refresh_from_db()
    if not created:
        raise ApiError(422, "upload_refused", " ".join(refused), details=refused)
    return Status(201, {"created": _documents(request, created), "refused": refused})


def _querydict(data: dict[str, list[str]]):
    from django.http import QueryDict

    q = QueryDict(mutable=True)
    for key, values in data.items():
        q.setlist(key, values)
    return q


@router.get(
    "/documents/{document_id}",
    response={200: schemas.DocumentOut, **ERRORS},
    url_name="document",
    tags=["Documents"],
    summary="A document’s status",
    description="Scope `read`. Status, stage and progress of a document’s indexing.",
)
def document_status(request, document_id: str):
    """One document: status, stage and progress of its indexing."""
    require_scope(request, "read")
    document = doc_selectors.document_for_user(user=request.user, document_id=document_id)
    return _documents(request, [document])[0]


@router.delete(
    "/documents/{document_id}",
    response={204: None, 409: schemas.Error, **ERRORS},
    url_name="document_delete",
    tags=["Documents"],
    summary="Delete a document",
    description="Scope `upload`. Deletes the document and its indexed chunks (its uploader, an owner of one of its tags, an admin); not while it is being indexed.",
)
def document_delete(request, document_id: str):
    """Delete a document and its indexed chunks (its uploader, an owner of one of its tags, admins)."""
    require_scope(request, "upload")
    document = doc_selectors.document_for_user(user=request.user, document_id=document_id)
    if not policy.may_manage_document(user=request.user, document=document):
        raise not_found("No such document.")
    problem = doc_services.delete_problem(document=document)
    if problem:
        raise ApiError(409, "busy", problem)
    doc_services.document_delete(document=document, actor=request.user, request=request)
    return Status(204, None)


# ----------------------------------------------------------------------------------- sessions


@router.get(
    "/sessions",
    response={200: list[schemas.SessionOut], **ERRORS},
    url_name="sessions",
    tags=["Sessions"],
    summary="List your chats",
    description="Scope `read`. Your chat sessions, most recent first.",
)
def sessions_list(request, archived: bool = False, limit: int = Query(50, ge=1, le=200)):
    require_scope(request, "read")
    sessions = chat_selectors.sessions_for_user(user=request.user).filter(archived_at__isnull=not archived)
    return [_session(s) for s in sessions[:limit]]


@router.get(
    "/sessions/{session_id}",
    response={200: schemas.SessionHistory, **ERRORS},
    url_name="session",
    tags=["Sessions"],
    summary="A chat’s history",
    description="Scope `read`. A chat’s messages with their citations, as you see them now.",
)
def session_history(request, session_id: str):
    """A chat's messages as its owner sees them now (sources of documents they lost are withheld)."""
    require_scope(request, "read")
    session = policy.session_or_none(user=request.user, session_id=session_id)
    if session is None:
        raise not_found("No such chat session.")
    messages = chat_selectors.messages_as_seen_by(
        user=request.user, messages=chat_selectors.session_messages(session=session)
    )
    out = []
    for m in messages:
        citations = m.citations or []
        out.append(
            {
                "id": m.pk,
                "role": m.role,
                "status": m.status,
                "content": m.content,
                "created_at": m.created_at,
                "citations": [c["source_id"] for c in citations],
                "citation_map": _citation_map(request, citations),
                "action": m.action,
                "author": routing_services.display_name(m.author) if m.role == Message.Role.OWNER else None,
                "error": m.error,
                "grounding": _grounding(m),
            }
        )
    return {"session": _session(session), "messages": out}


# ----------------------------------------------------------------------------------- routed questions


@router.get(
    "/questions",
    response={200: list[schemas.QuestionOut], **ERRORS},
    url_name="questions",
    tags=["Routed questions"],
    summary="Questions routed to you",
    description="Scope `answer`. Open questions routed to you (tags you own; admins also those without an owner).",
)
def questions_list(request):
    """Open questions routed to the caller (tags they own; admins also those without an owner)."""
    require_scope(request, "answer")
    return [
        {
            "id": q.pk,
            "question": q.question,
            "asker": routing_services.display_name(q.asker),
            "tag": q.tag.slug if q.tag_id else None,
            "reason": q.reason,
            "status": q.status,
            "created_at": q.created_at,
            "url": request.build_absolute_uri(reverse("routing:question", args=[q.pk])),
        }
        for q in routing_selectors.inbox_questions(user=request.user)[:200]
    ]


@router.post(
    "/questions/{question_id}/answer",
    response={200: schemas.AnswerOut, 409: schemas.Error, **ERRORS},
    url_name="question_answer",
    tags=["Routed questions"],
    summary="Answer a routed question",
    description="Scope `answer`. Every asker of the question’s group gets the answer in their chat.",
)
def question_answer(request, body: schemas.AnswerIn, question_id: int = Path(..., ge=1, le=ID_MAX)):
    """Answer a routed question: every asker of its group gets the answer in their chat."""
    require_scope(request, "answer")
    question = routing_selectors.question_for_user(user=request.user, question_id=question_id)
    try:
        answered = routing_services.question_answer(question=question, user=request.user, text=body.answer)
    except routing_services.QuestionNotFound:
        raise not_found("No such question.") from None
    except routing_services.RoutingError as e:
        raise ApiError(409 if "already" in str(e) else 422, "not_answerable", str(e)) from None
    return {"answered": [q.pk for q in answered]}


# ----------------------------------------------------------------------------------- health


class OptionalTokenAuth(TokenAuth):
    """Health answers everyone; an admin's token adds the parts' details."""

    def __call__(self, request):
        return super().__call__(request) or True


@router.get(
    "/health",
    response={200: schemas.HealthOut, 503: schemas.HealthOut, 429: schemas.Error},
    auth=OptionalTokenAuth(),
    openapi_extra={"security": [{}]},  # public: a token is optional (an admin's adds details)
    url_name="health",
    tags=["Health"],
    summary="Health",
    description="No token needed. `status`, `rag_ok`, `rag_details`, `index_metrics`; counts and each part’s check for admin tokens only.",
)
async def health(request):
    """status, rag_ok, rag_details, index_metrics (docs/specs/rag-standard-v1.md); counts, the
    index's dimension and each part's check for admin tokens only (as /health)."""
    report = await health_report()
    admin = request.auth is not True and await sync_to_async(policy.is_admin)(request.user)
    body: dict[str, Any] = {"status": report.status, **spec_fields(report, detailed=admin)}
    if admin:
        body["parts"] = report.parts
    return Status(200 if report.up else 503, body)


api.add_router("/", router)
