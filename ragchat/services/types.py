"""Spec v3 data models, plus the search result, chunk record and stream events the core passes around.

Field names and order of the spec's models are kept; fields the spec does not have come after
its own and have defaults, so a model built the spec's way still works.

References: "spec v3": docs/specs/rag-service-spec-v3-FINAL.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

# ID formats (spec v3 "ID Formats")
DOCUMENT_ID_PATTERN = r"[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}"
SOURCEID_FORMAT_PATTERN = r"[a-f0-9-]{36}:\d+"
# A citation marker: the model's "[SourceId: <id>]", or "[SourceId: <id>; attributed]", one ragchat
# attached to a sentence that a passage supports and the model left uncited (services/attribution.py).
SOURCEID_PATTERN = r"\[SourceId:\s*([a-f0-9-]{36}:\d+)(?:;\s*attributed)?\]"
ATTRIBUTED_PATTERN = r"\[SourceId:\s*([a-f0-9-]{36}:\d+);\s*attributed\]"


def make_source_id(document_id: str, chunk_index: int) -> str:
    return f"{document_id}:{chunk_index}"


@dataclass
class ChatMessage:
    """Single message in chat history."""

    role: Literal["user", "assistant", "system"]
    content: str
    timestamp: datetime | None = None


@dataclass
class RAGRequest:
    """Input for RAG generation."""

    query: str  # User's question
    user_tags: list[str]  # User's access tags (for VectorService filtering)
    tenant_id: str = "default"  # Multi-tenant isolation (passed to VectorService)
    chat_history: list[ChatMessage] | None = None  # Previous messages
    model: str | None = None  # Override default model (must be in allowlist)
    max_context_chunks: int = 5  # Limit context size
    # Not in the spec: the text embedded for retrieval when it differs from the question
    # (a follow-up's contextualised query), how it was chosen, and the request id for logs.
    retrieval_query: str | None = None
    query_strategy: str = "first message (raw query)"
    request_id: str | None = None
    # The glossary of the asker's tags (GlossaryEntry, services/glossary.py): the search query is
    # expanded with the other names of the terms it mentions.
    glossary: tuple[Any, ...] = ()


@dataclass
class ConfidenceScore:
    """Hybrid confidence scoring with breakdown."""

    overall: int  # 0-100 final score
    retrieval_score: float  # Average similarity of top chunks (0-1)
    coverage_score: float  # Keyword overlap between answer and context (0-1)
    llm_score: int  # LLM self-assessment (0-100)


@dataclass
class Citation:
    """Deterministic source citation."""

    source_id: str  # Format: "{document_id}:{chunk_index}"
    document_id: str  # UUIDv4
    document_name: str
    chunk_index: int
    page_number: int | None  # None displayed as "N/A"
    section: str | None  # None displayed as "N/A"
    relevance_score: float  # 0.0-1.0 from vector search
    snippet: str  # First 200 chars, "..." if truncated
    snippet_full: str  # Max 1000 chars (for UI hover only)
    # Not in the spec: extra payload of the chunk (e.g. verified_by / verified_at).
    metadata: dict[str, Any] = field(default_factory=dict)
    # Not in the spec: every marker naming this source was attached by ragchat (attribution.py),
    # none was written by the model.
    attributed: bool = False

    @property
    def page_display(self) -> str:
        return "N/A" if self.page_number is None else str(self.page_number)

    @property
    def section_display(self) -> str:
        return "N/A" if not self.section else self.section


@dataclass
class RouteTarget:
    """Routing destination when confidence is low."""

    tag: str  # Primary tag from context
    owner_user_id: str | None  # From tags.owner_user_id, may be None
    owner_email: str | None  # From users.email if owner exists
    reason: str  # Why routing (e.g., "Low confidence: 45%")
    fallback: bool  # True if no owner found, route to admin


@dataclass(frozen=True)
class TagOwner:
    """What the app tells the core about a tag's owner (the core never queries the database).

    The lookup callable returns None when the tag does not exist; a TagOwner with user_id None
    when the tag has no owner; email None when the owner's account is gone or inactive.
    """

    user_id: str | None
    email: str | None


@dataclass
class SearchResult:
    """One chunk returned by the vector service; `score` is cosine similarity on Qdrant's 0-1 scale."""

    document_id: str
    chunk_index: int
    document_name: str
    chunk_text: str
    score: float
    page_number: int | None = None
    section: str | None = None
    tags: list[str] = field(default_factory=list)
    tenant_id: str = "default"
    token_count: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def source_id(self) -> str:
        return make_source_id(self.document_id, self.chunk_index)


@dataclass(frozen=True)
class ChunkRecord:
    """One chunk to index: the payload stored next to its vectors."""

    document_id: str
    chunk_index: int
    document_name: str
    chunk_text: str
    tags: tuple[str, ...]
    tenant_id: str = "default"
    page_number: int | None = None
    section: str | None = None
    token_count: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def source_id(self) -> str:
        return make_source_id(self.document_id, self.chunk_index)


@dataclass
class RAGResponse:
    """Output from RAG generation."""

    answer: str  # Generated response text
    confidence: ConfidenceScore  # Detailed confidence breakdown
    citations: list[Citation]  # Source references (deterministic)
    action: Literal["CITE", "ROUTE"]  # Response action
    route_to: RouteTarget | None  # Routing details if action=ROUTE
    model_used: str  # Actual model used
    context_chunks_used: int  # Number of chunks in context
    context_tokens_used: int  # Actual tokens used for context
    generation_time_ms: float  # Response time
    grounded: bool  # True iff len(citations) > 0
    # Not in the spec: per-stage latency in ms (embed, search, generate, rate), the chunks that
    # were in the prompt (what the asker was allowed to see), how the query was chosen, the id.
    timings: dict[str, float] = field(default_factory=dict)
    context: list[SearchResult] = field(default_factory=list)
    query_strategy: str = "first message (raw query)"
    retrieval_query: str = ""
    request_id: str | None = None
    # Not in the spec: the per-sentence grounding check (A2), a GroundingReport (services/grounding.py),
    # and the glossary terms the search query was expanded with.
    grounding: Any = None
    glossary_terms: list[str] = field(default_factory=list)


# Stream events yielded by RAGService.stream(), in this order:
# StageEvent("searching") -> ContextEvent -> StageEvent("generating") -> TokenEvent* ->
# StageEvent("rating") -> FinalEvent. On an LLM failure the stream raises after what it yielded.
@dataclass(frozen=True)
class StageEvent:
    stage: Literal["searching", "generating", "rating"]


@dataclass(frozen=True)
class ContextEvent:
    results: tuple[SearchResult, ...]


@dataclass(frozen=True)
class TokenEvent:
    text: str


@dataclass(frozen=True)
class FinalEvent:
    response: RAGResponse


StreamEvent = StageEvent | ContextEvent | TokenEvent | FinalEvent
