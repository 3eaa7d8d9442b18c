"""The document viewer: a citation opens here, at the cited passage, highlighted.

A PDF shows the cited page as an image with the passage boxed over it and its text beside; every
other kind shows its text (the chunks as indexed, in order, with their sections) with the cited
chunk marked. People who may manage the document also see its chunks as indexed. Reading goes
through the same selector as every document page: a document the reader may not read is the
missing document's 404.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from access import policy
from documents import selectors, viewer
from ragchat.bounds import COUNT_MAX, request_int
from ragchat.services import page_view


def viewer_url(document_id: str, chunk_index: int | None = None) -> str:
    """Where a citation opens: the viewer at the chunk (the #passage anchor scrolls to it)."""
    url = reverse("documents:view", args=[document_id])
    return url if chunk_index is None else f"{url}?chunk={int(chunk_index)}#passage"


def _number(request, name: str) -> int | None:
    raw = request.GET.get(name, "").strip()
    if not raw:
        return None
    number = request_int(raw, maximum=COUNT_MAX)
    if number is None:
        raise ValueError(f"“{name}” must be a whole number, not “{raw[:40]}”.")
    return number


@login_required
@require_GET
def document_view(request, document_id):
    document = selectors.document_for_user(user=request.user, document_id=document_id)
    try:
        cited_index, page = _number(request, "chunk"), _number(request, "page")
    except ValueError as e:
        return HttpResponseBadRequest(str(e), content_type="text/plain; charset=utf-8")
    can_manage = policy.may_manage_document(user=request.user, document=document)
    show_indexed = can_manage and request.GET.get("show") == "chunks"
    problem = ""
    try:
        chunks = viewer.document_chunks(document=document)
    except viewer.ChunksUnavailable as e:
        chunks, problem = [], str(e)
    cited = next((c for c in chunks if c.chunk_index == cited_index), None)
    context = {
        "d": document,
        "can_manage": can_manage,
        "show_indexed": show_indexed,
        "chunks": chunks,
        "cited": cited,
        "cited_missing": cited_index is not None and cited is None and not problem,
        "problem": problem,
        "is_pdf": document.kind == "pdf" and not show_indexed,
        "is_web": document.source_kind == document.Source.WEB and bool(document.source_url),
        "chunk_param": "" if cited is None else f"chunk={cited.chunk_index}&",
    }
    if context["is_pdf"]:
        context.update(_pdf_context(document=document, chunks=chunks, cited=cited, page=page))
    elif not show_indexed:
        context["reading"] = viewer.reading(
            document=document, chunks=chunks, cited=cited.chunk_index if cited else None
        )
    return render(request, "documents/view.html", context)


def _pdf_context(*, document, chunks, cited, page: int | None) -> dict:
    pages = document.pages or 0
    if not pages:
        try:
            pages = page_view.pdf_page_count(viewer.document_original(document))
        except page_view.PageNotFound:
            pages = 0
    page = page or (cited.page_number if cited and cited.page_number else 1)
    if pages and not 1 <= page <= pages:
        raise Http404(f"This document has {pages} page{'s' if pages != 1 else ''}; there is no page {page}.")
    on_page = [c for c in chunks if c.page_number == page]
    boxes: list[list[float]] = []
    width = height = 0
    if pages:
        try:
            width, height = viewer.page_size(document=document, page=page)
        except page_view.PageNotFound:
            pages = 0
    if pages and cited is not None and cited.page_number == page:
        boxes = viewer.passage_boxes(document=document, page=page, passage=cited.chunk_text)
    reading = viewer.reading(document=document, chunks=on_page, cited=cited.chunk_index if cited else None)
    return {
        "page": page,
        "pages": pages,
        "page_width": width,
        "page_height": height,
        "boxes": ";".join(",".join(str(v) for v in box) for box in boxes),
        "box_count": len(boxes),
        "reading": reading,
        "ocr_page": page in (document.ocr_pages or []),
    }


@login_required
@require_GET
def document_page(request, document_id, page: int):
    """One page of a PDF as a PNG; only for readers of the document (cached on disk per version)."""
    document = selectors.document_for_user(user=request.user, document_id=document_id)
    if document.kind != "pdf":
        raise Http404("This document has no pages to show.")
    try:
        png = viewer.document_page_png(document=document, page=page)
    except page_view.PageNotFound as e:
        raise Http404(f"No such page: {e}.") from e
    response = HttpResponse(png, content_type="image/png")
    response["Cache-Control"] = "private, max-age=3600"
    response["X-Content-Type-Options"] = "nosniff"
    return response
