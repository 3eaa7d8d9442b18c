"""Document pages: list with filters and tag facets, htmx upload, detail, download, retry, replace, delete.

Every lookup goes through selectors that apply the tag rule; a document the user may not read is a
404, the same as one that does not exist. Document-derived strings are always auto-escaped.
"""

from __future__ import annotations

import mimetypes

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from access import policy
from documents import selectors, services
from documents.forms import FilterForm, ReplaceForm, UploadForm
from documents.tasks import ingestion_enqueue
from ragchat.htmx import redirect_after_post, refuse_in_flash
from ragchat.partials import render_partial


def row_context(*, user, document, manageable: set[str] | None = None) -> dict:
    """A row's context; `manageable` (ids from one policy query) saves a query per row in lists."""
    if manageable is None:
        manageable = policy.manageable_document_ids(user=user, document_ids=[document.pk])
    return {"d": document, "can_manage": str(document.pk) in manageable}


def rows_context(*, user, documents) -> list[dict]:
    documents = list(documents)
    manageable = policy.manageable_document_ids(user=user, document_ids=[d.pk for d in documents])
    return [row_context(user=user, document=d, manageable=manageable) for d in documents]


def render_row(*, user, document, live: bool = False) -> str:
    """The document's row in the list; `live`: out of band (hx-swap-oob), to replace the row on the page."""
    return render_partial("documents/_row.html", {**row_context(user=user, document=document), "live": live})


@login_required
@require_GET
def document_list(request):
    filters = FilterForm(request.GET or None)
    values = filters.cleaned_data if filters.is_valid() else {}
    documents = selectors.documents_for_user(
        user=request.user,
        tag=values.get("tag") or None,
        status=values.get("status") or None,
        kind=values.get("kind") or None,
        query=values.get("q") or None,
        source=values.get("source") or None,
    )
    uploadable = policy.uploadable_tags(user=request.user)
    rows = rows_context(user=request.user, documents=documents[:200])
    context = {
        "filters": filters,
        "active_tag": values.get("tag") or "",
        "facets": selectors.tag_facets(user=request.user, documents=selectors.documents_for_user(user=request.user)),
        "rows": rows,
        "total": documents.count(),
        "upload_form": UploadForm(tag_choices=uploadable) if uploadable.exists() else None,
        "max_upload_mb": settings.RAGCHAT_MAX_UPLOAD_BYTES // (1024 * 1024),
    }
    return render(request, "documents/list.html", context)


def _upload_one(*, user, upload, tags) -> tuple[object | None, str | None]:
    try:
        document = services.document_upload(user=user, upload=upload, tags=tags)
    except services.UploadRefused as e:
        return None, str(e)
    return document, None


@login_required
@require_POST
def document_upload(request):
    uploadable = policy.uploadable_tags(user=request.user)
    if not uploadable.exists():
        raise Http404("You cannot upload documents.")
    form = UploadForm(request.POST, request.FILES, tag_choices=uploadable)
    created, refused = [], []
    if form.is_valid():
        for upload in form.cleaned_data["files"]:
            document, error = _upload_one(user=request.user, upload=upload, tags=list(form.cleaned_data["tags"]))
            if error:
                refused.append(error)
            else:
                created.append(document)
    else:
        refused.extend(form.problems())
    for document in created:
        ingestion_enqueue(document.id)
        document.refresh_from_db()
    if not request.htmx:
        for document in created:
            messages.success(request, f"{document.original_filename}: uploaded; indexing started.")
        for error in refused:
            messages.error(request, error)
        return redirect("documents:list")
    context = {
        "created": rows_context(user=request.user, documents=created),
        "refused": refused,
        "facets": selectors.tag_facets(user=request.user, documents=selectors.documents_for_user(user=request.user)),
        "active_tag": request.GET.get("tag", ""),
    }
    return render(request, "documents/_upload_result.html", context)


@login_required
@require_GET
def document_detail(request, document_id):
    document = selectors.document_for_user(user=request.user, document_id=document_id)
    context = {
        **row_context(user=request.user, document=document),
        "replace_form": ReplaceForm(),
        "can_clear_outdated": bool(document.outdated_at)
        and policy.may_clear_outdated(user=request.user, document=document),
    }
    return render(request, "documents/detail.html", context)


@login_required
@require_GET
def document_row(request, document_id):
    document = selectors.document_for_user(user=request.user, document_id=document_id)
    return HttpResponse(render_row(user=request.user, document=document))


@login_required
@require_GET
def document_download(request, document_id):
    document = selectors.document_for_user(user=request.user, document_id=document_id)
    try:
        handle = document.file.open("rb")
    except (FileNotFoundError, ValueError) as e:
        raise Http404("The original file is missing.") from e
    # Always an attachment, never rendered by the browser: an uploaded HTML page must not run here.
    content_type = document.mime_type or mimetypes.guess_type(document.original_filename)[0] or ""
    if not content_type or content_type.startswith("text/html"):
        content_type = "application/octet-stream"
    response = FileResponse(handle, as_attachment=True, filename=document.original_filename, content_type=content_type)
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    response["X-Content-Type-Options"] = "nosniff"
    return response


def _managed_document(request, document_id):
    document = selectors.document_for_user(user=request.user, document_id=document_id)
    if not policy.may_manage_document(user=request.user, document=document):
        raise Http404("No such document.")  # readers may not learn more than that it is not theirs to change
    return document


def _from_row(request, document) -> bool:
    """An htmx action of the document's row in the list (hx-target="#doc-<id>"): it gets the row back."""
    return bool(request.htmx) and request.htmx.target == f"doc-{document.pk}"


def _back(request, document) -> str:
    """Where a form without script returns: the list when it was sent from the list (from=list), else
    the document's page."""
    if request.POST.get("from") == "list" or request.GET.get("from") == "list":
        return reverse("documents:list")
    return reverse("documents:detail", args=[document.pk])


def _row_or_redirect(request, document, message: str | None = None, level=messages.SUCCESS):
    if _from_row(request, document):
        return HttpResponse(render_row(user=request.user, document=document))
    if message:
        messages.add_message(request, level, message)
    return redirect_after_post(request, _back(request, document))


@login_required
@require_POST
def document_retry(request, document_id):
    document = _managed_document(request, document_id)
    if document.is_busy and not document.is_stale:
        return _row_or_redirect(request, document, "This document is already being indexed.", messages.INFO)
    services.document_requeue(document=document)
    ingestion_enqueue(document.id)
    document.refresh_from_db()
    return _row_or_redirect(request, document, "Indexing started again.")


@login_required
@require_POST
def document_replace(request, document_id):
    document = _managed_document(request, document_id)
    form = ReplaceForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, "Choose the file of the new version.")
        return redirect("documents:detail", document_id=document.id)
    if document.is_busy:
        messages.info(request, "Wait until the current indexing finishes, then upload the new version.")
        return redirect("documents:detail", document_id=document.id)
    upload = form.cleaned_data["file"]
    limit = settings.RAGCHAT_MAX_UPLOAD_BYTES
    if upload.size > limit:
        messages.error(
            request, f"This file is {upload.size / (1024 * 1024):.1f} MB; the limit is {limit // (1024 * 1024)} MB."
        )
        return redirect("documents:detail", document_id=document.id)
    try:
        services.document_replace_file(document=document, data=upload.read(), filename=upload.name or "")
    except services.UploadRefused as e:
        messages.error(request, str(e))
        return redirect("documents:detail", document_id=document.id)
    ingestion_enqueue(document.id)
    messages.success(request, f"Version {document.version} uploaded; its chunks replace the previous version's.")
    return redirect("documents:detail", document_id=document.id)


@login_required
@require_POST
def document_rename(request, document_id):
    document = _managed_document(request, document_id)
    try:
        services.document_rename(document=document, title=request.POST.get("title", ""))
    except services.UploadRefused as e:
        messages.error(request, str(e))
        return redirect("documents:detail", document_id=document.id)
    ingestion_enqueue(document.id)
    messages.success(request, f"Renamed to “{document.title}”; citations use the new title once re-indexing finishes.")
    return redirect("documents:detail", document_id=document.id)


@login_required
@require_http_methods(["GET", "POST"])
def document_delete(request, document_id):
    """GET: the page that asks first, where Delete leads without script (from the document's page, or
    from its row in the list with from=list); POST: delete. With script the dialog asks (data-confirm,
    static/js/confirm.js) and htmx posts: the row's action gets an empty row, the page's is sent to
    the list. While it is being indexed it is refused, saying why (a row's htmx action: in the page's
    message area). Readers who may not manage it, and everyone else, get the missing document's 404."""
    document = _managed_document(request, document_id)
    if request.method == "GET":
        cancel_url = _back(request, document)
        context = {"d": document, "cancel_url": cancel_url, "from_list": cancel_url == reverse("documents:list")}
        return render(request, "documents/delete.html", context)
    problem = services.delete_problem(document=document)
    if problem and _from_row(request, document):
        # The row may be older than the document's state (it offered Delete): the sentence goes to the
        # page's message area, and the row as it is now with it.
        return refuse_in_flash(request, problem, also=render_row(user=request.user, document=document, live=True))
    if problem:
        return _row_or_redirect(request, document, problem, messages.INFO)
    title, from_row = document.title, _from_row(request, document)
    services.document_delete(document=document, actor=request.user, request=request)
    if from_row:
        return HttpResponse("")
    messages.success(request, f"“{title}” and its indexed chunks were deleted.")
    return redirect_after_post(request, reverse("documents:list"))


@login_required
@require_POST
def document_clear_outdated(request, document_id):
    """Clear the outdated mark (an admin, an owner of one of its tags, or whoever marked it)."""
    document = selectors.document_for_user(user=request.user, document_id=document_id)
    if not policy.may_clear_outdated(user=request.user, document=document):
        raise Http404("No such document.")
    if document.outdated_at is not None:
        services.document_clear_outdated(document=document)
    messages.success(request, "The outdated mark was cleared: citations no longer warn about it.")
    return redirect("documents:detail", document_id=document.id)
