""" "View as": what one person's retrieval would return for a question, and what it would not.

An admin answers "why can't Noah see the travel policy?" by running Noah's retrieval — the same
quality pipeline a chat turn runs, under Noah's tags — next to the same retrieval over every tag of
the tenant. Nothing is generated. Each use is written to the audit log.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from asgiref.sync import async_to_sync

from access import policy
from access.audit import audit_record
from access.models import AuditEvent
from ragchat.services.citations import make_snippet

PREVIEW_CHUNKS = 10


@dataclass(frozen=True)
class PreviewRow:
    document_id: str
    document_name: str
    page_number: int | None
    section: str | None
    score: float
    snippet: str
    tags: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # the tags that would let the person read it


@dataclass(frozen=True)
class Preview:
    subject_tags: list[str]
    returned: list[PreviewRow]
    not_returned: list[PreviewRow]


def _rows(results, *, tag_names: dict[str, str], held: set[str]) -> list[PreviewRow]:
    rows = []
    for r in results:
        tags = sorted(r.tags or [])
        rows.append(
            PreviewRow(
                document_id=r.document_id,
                document_name=r.document_name,
                page_number=r.page_number,
                section=r.section,
                score=r.score,
                snippet=make_snippet(r.chunk_text)[0],  # as the person's chat would show it
                tags=[tag_names.get(t, t) for t in tags],
                missing=[tag_names.get(t, t) for t in tags if t not in held],
            )
        )
    return rows


async def _retrieve(*, question: str, tags: list[str], tenant_id: str):
    from ragchat import runtime

    await runtime.ready_vector_service()
    return await runtime.rag_service().get_quality_context(
        question, user_tags=tags, tenant_id=tenant_id, max_chunks=PREVIEW_CHUNKS
    )


def view_as_preview(*, admin, subject, question: str, request=None) -> Preview:
    """Run the subject's retrieval and the tenant-wide one; record the use in the audit log."""
    if not policy.may_view_as(user=admin, subject=subject):
        raise PermissionError("Only an admin of the same tenant may view as this person.")
    held = policy.readable_tag_slugs(user=subject)
    everything = policy.readable_tag_slugs(user=admin)  # an admin holds every tag of the tenant
    tag_names = dict(policy.readable_tags(user=admin).values_list("slug", "name"))
    theirs = async_to_sync(_retrieve)(question=question, tags=held, tenant_id=subject.tenant_id)
    wider = async_to_sync(_retrieve)(question=question, tags=everything, tenant_id=admin.tenant_id)
    returned_ids = {r.source_id for r in theirs}
    preview = Preview(
        subject_tags=[tag_names.get(t, t) for t in held],
        returned=_rows(theirs, tag_names=tag_names, held=set(held)),
        not_returned=_rows([r for r in wider if r.source_id not in returned_ids], tag_names=tag_names, held=set(held)),
    )
    audit_record(
        action=AuditEvent.Action.VIEW_AS,
        tenant_id=admin.tenant_id,
        actor=admin,
        subject=subject,
        summary=f"viewed as {subject.get_username()}: “{question[:200]}”",
        data={
            "question": question[:1000],
            "returned": [r.document_id for r in preview.returned],
            "not_returned": [r.document_id for r in preview.not_returned],
        },
        request=request,
    )
    return preview
