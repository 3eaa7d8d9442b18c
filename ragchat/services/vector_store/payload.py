"""What one stored point is: its id, its two named vectors, and the payload of a chunk.

Both backends store exactly this shape; the service turns a `ChunkRecord` into a payload on the
way in and a payload back into a `SearchResult` on the way out.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from ragchat.services.bm25 import SparseVec
from ragchat.services.types import ChunkRecord, SearchResult

# Fixed namespace: point ids are uuid5(NAMESPACE, "{document_id}:{chunk_index}"), so re-upserting a
# chunk overwrites it instead of duplicating it, on any machine.
POINT_NAMESPACE = uuid.UUID("6f1c3e0a-4b7d-5c2e-9a8f-2d1e0b7c4a93")
DENSE = "dense"
SPARSE = "bm25"
KEYWORD_FIELDS = ("tags", "tenant_id", "document_id", "knowledge_status")
PAYLOAD_FIELDS = (
    "document_id",
    "chunk_index",
    "document_name",
    "page_number",
    "section",
    "chunk_text",
    "tags",
    "tenant_id",
    "token_count",
)


def point_id(document_id: str, chunk_index: int) -> str:
    return str(uuid.uuid5(POINT_NAMESPACE, f"{document_id}:{chunk_index}"))


@dataclass(frozen=True)
class PointData:
    id: str
    dense: list[float]
    sparse: SparseVec
    payload: dict[str, Any]


def chunk_payload(chunk: ChunkRecord) -> dict[str, Any]:
    """The chunk's fields, plus its free metadata (which may not shadow a field)."""
    payload: dict[str, Any] = {key: value for key, value in chunk.metadata.items() if key not in PAYLOAD_FIELDS}
    payload.update(
        document_id=chunk.document_id,
        chunk_index=chunk.chunk_index,
        document_name=chunk.document_name,
        page_number=chunk.page_number,
        section=chunk.section,
        chunk_text=chunk.chunk_text,
        tags=list(chunk.tags),
        tenant_id=chunk.tenant_id,
        token_count=chunk.token_count,
    )
    return payload


def search_result(payload: dict[str, Any], score: float) -> SearchResult:
    return SearchResult(
        document_id=str(payload.get("document_id", "")),
        chunk_index=int(payload.get("chunk_index", 0)),
        document_name=str(payload.get("document_name", "")),
        chunk_text=str(payload.get("chunk_text", "")),
        score=score,
        page_number=payload.get("page_number"),
        section=payload.get("section"),
        tags=list(payload.get("tags") or []),
        tenant_id=str(payload.get("tenant_id", "default")),
        token_count=payload.get("token_count"),
        metadata={k: v for k, v in payload.items() if k not in PAYLOAD_FIELDS},
    )
