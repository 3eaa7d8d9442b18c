"""Request and response shapes of /api/v1/ (pydantic, through django-ninja): they validate what
comes in and are the OpenAPI schema of what goes out."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from ninja import Field, Schema


class Error(Schema):
    code: str = Field(description="Machine-readable class, e.g. question_too_short, not_found, rate_limited")
    message: str = Field(description="A sentence for a person")
    request_id: str
    details: Any | None = None


class SearchHit(Schema):
    title: str
    snippet: str
    score: float
    chunk_id: str = Field(description="<document_id>:<chunk_index>")
    document_id: str
    url: str = Field(description="The document's page (or, for an allowlisted web page, the page itself)")
    page: int | None = None
    section: str | None = None
    tags: list[str] = []


class SearchOut(Schema):
    query: str
    k: int
    results: list[SearchHit]
    glossary_terms: list[str] = Field(
        [], description="Glossary terms the query named: it was also searched by their other names"
    )
    request_id: str


class ChatIn(Schema):
    question: str = Field(description="The question (length limits: QUESTION_MIN_CHARS / QUESTION_MAX_CHARS)")
    session_id: str | None = Field(None, description="Continue this conversation; omitted: a new one")
    model: str | None = Field(None, description="One of the allowed models; omitted: the default")


class CitationInfo(Schema):
    title: str
    url: str
    document_id: str
    page: int | None = None
    section: str | None = None
    snippet: str = ""
    score: float | None = None
    attributed: bool = Field(
        False,
        description="true: ragchat attached this citation, the model did not write it: the passage supports a "
        "sentence the model left uncited (its markers in `answer` read `[SourceId: <id>; attributed]`); "
        "false: the model cited it at least once",
    )


class Confidence(Schema):
    overall: int | None = None
    retrieval: float | None = None
    coverage: float | None = None
    llm: int | None = None


class RoutedTo(Schema):
    owner: str = Field(description="Who the question went to (a person's name, or 'an administrator')")
    tag: str | None = None
    reason: str = ""
    question_id: int | None = None


class GroundingSentence(Schema):
    text: str
    status: Literal["supported", "uncited", "unsupported", "none"] = Field(
        description="supported: by a passage it cites; uncited: by a passage of the answer's context it "
        "does not cite; unsupported: by none (check it); none: states nothing to check"
    )
    start: int = Field(description="Offset of the sentence in `answer`")
    end: int
    cited: list[str] = []
    supported_by: str | None = Field(None, description="The chunk that supports it (or comes closest)")
    score: float = Field(0.0, description="Share of its content words found in that chunk")
    missing_facts: list[str] = Field([], description="Figures, names or a negation the chunk does not have")
    attributed: list[str] = Field([], description="Those of `cited` that ragchat attached, not the model")


class Grounding(Schema):
    claims: int = Field(description="Sentences that state something")
    supported: int = Field(description="Claims supported by the answer's passages (cited or not)")
    cited_supported: int = Field(description="Claims supported by a passage they cite (axiom A2)")
    attributed: int = Field(0, description="Claims whose only citations ragchat attached (the model cited none)")
    supported_share: float | None = None
    sentences: list[GroundingSentence]


class ChatOut(Schema):
    request_id: str
    session_id: str
    message_id: int
    question: str
    answer: str
    citations: list[str]
    citation_map: dict[str, CitationInfo]
    confidence: Confidence
    action: Literal["answered", "routed"]
    routed_to: RoutedTo | None = None
    model: str
    grounding: Grounding | None = Field(None, description="Per-sentence grounding check of the answer (A2)")
    timings: dict[str, float] = {}


class DocumentOut(Schema):
    id: str
    title: str
    filename: str
    status: str
    stage: str
    progress: int
    error: str
    kind: str
    size: int
    pages: int | None
    chunks: int
    warnings: list[str]
    version: int
    source: str
    source_url: str
    tags: list[str]
    can_manage: bool
    url: str
    created_at: datetime
    indexed_at: datetime | None


class DocumentPage(Schema):
    items: list[DocumentOut]
    count: int
    page: int
    pages: int


class UploadOut(Schema):
    created: list[DocumentOut]
    refused: list[str]


class SessionOut(Schema):
    id: str
    title: str
    created_at: datetime
    updated_at: datetime
    pinned: bool
    archived: bool


class MessageOut(Schema):
    id: int
    role: str
    status: str
    content: str
    created_at: datetime
    citations: list[str] = []
    citation_map: dict[str, CitationInfo] = {}
    action: str = ""
    author: str | None = None
    error: str = ""
    grounding: Grounding | None = None


class SessionHistory(Schema):
    session: SessionOut
    messages: list[MessageOut]


class QuestionOut(Schema):
    id: int
    question: str
    asker: str
    tag: str | None
    reason: str
    status: str
    created_at: datetime
    url: str


class AnswerIn(Schema):
    answer: str


class AnswerOut(Schema):
    answered: list[int] = Field(description="Every question of the group that received the answer")


class HealthOut(Schema):
    status: Literal["ok", "degraded", "down"]
    rag_ok: bool
    rag_details: str
    index_metrics: dict[str, Any] | None = None
    parts: dict[str, Any] | None = Field(None, description="Each part's check (admin tokens only)")
