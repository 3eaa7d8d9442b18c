"""RAGService: the stateless pipeline of spec v3 — validate model, retrieve quality context, budget
tokens, prompt with SourceIds, stream the answer, extract citations, score confidence, decide
CITE/ROUTE — as an async stream of events that ends with the RAGResponse.

Nothing here knows about Django: the tag owner lookup is a callable the app passes in.

References: "spec v3": docs/specs/rag-service-spec-v3-FINAL.md.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from .attribution import CitationAttributor
from .budget import TokenBudget
from .citations import CitationNormalizer, build_context, extract_citations, make_snippet
from .confidence import answer_action, calculate_confidence, coverage_context, question_focus
from .config import RAGSettings
from .declines import DeclineGate
from .errors import (
    ContextError,
    EmptyAnswerError,
    LLMConnectionError,
    LLMTimeoutError,
    ModelUnavailableError,
    RAGServiceError,
)
from .glossary import expand_query
from .grounding import answers_with_a_figure, check_answer
from .logs import request_id_var
from .prompts import (
    CONFIDENCE_PROMPT,
    INSUFFICIENT_CONTEXT_ANSWER,
    INSUFFICIENT_CONTEXT_REASON,
    RAG_SYSTEM_PROMPT,
)
from .reasoning import ThinkFilter
from .retrieval import Reranker, build_retrieval_query, get_quality_context, standalone_query, strong_passages
from .routing import OwnerLookup, get_route_target
from .smalltalk import detect_smalltalk
from .types import (
    ChatMessage,
    ConfidenceScore,
    ContextEvent,
    FinalEvent,
    RAGRequest,
    RAGResponse,
    RouteTarget,
    SearchResult,
    StageEvent,
    StreamEvent,
    TokenEvent,
)

logger = logging.getLogger(__name__)

STRATEGY_SMALLTALK = "smalltalk (direct reply)"
TIMING_KEYS = ("embed", "search", "generate", "rate")
# Extra wait on top of RAG_TIMEOUT_SECONDS before our own guard fires: the LLM client's timeout
# should normally raise first, with its more precise message.
_STALL_GRACE_SECONDS = 0.25


def _elapsed_ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def insufficient_context_response(*, settings: RAGSettings, model: str, elapsed_ms: float, **extra: Any) -> RAGResponse:
    """spec v3 INSUFFICIENT_CONTEXT_RESPONSE: nothing retrieved, so nothing generated; the admin gets it."""
    return RAGResponse(
        answer=INSUFFICIENT_CONTEXT_ANSWER,
        confidence=ConfidenceScore(overall=0, retrieval_score=0.0, coverage_score=0.0, llm_score=0),
        citations=[],
        action="ROUTE",
        route_to=RouteTarget(
            tag="system",
            owner_user_id=None,
            owner_email=settings.rag_admin_email,
            reason=INSUFFICIENT_CONTEXT_REASON,
            fallback=True,
        ),
        model_used=model,
        context_chunks_used=0,
        context_tokens_used=0,
        generation_time_ms=elapsed_ms,
        grounded=False,
        **extra,
    )


def context_summary(chunks: Sequence[SearchResult]) -> str:
    """What the rating prompt sees of the context: each chunk, cut to its 1000-char snippet_full."""
    return "\n\n".join(f"[{c.document_name}] {make_snippet(c.chunk_text)[1]}" for c in chunks)


class RAGService:
    """Orchestrates RAG pipeline: retrieve → prompt → generate → evaluate."""

    def __init__(
        self,
        vector_service: Any,
        settings: RAGSettings,
        *,
        llm: Any | None = None,
        ollama_url: str | None = None,
        default_model: str | None = None,
        owner_lookup: OwnerLookup | None = None,
        reranker: Reranker | None = None,
        token_counter: Any | None = None,
    ):
        self.vector_service = vector_service
        self.settings = settings
        self.ollama_url = ollama_url or settings.ollama_base_url
        self.default_model = default_model or settings.chat_model
        self.min_similarity_score = settings.rag_min_similarity_score
        self.max_chunks_per_doc = settings.rag_max_chunks_per_doc
        self.chunk_overlap_threshold = settings.rag_chunk_overlap_threshold
        self.dedup_candidates_cap = settings.rag_dedup_candidates_cap
        self.confidence_threshold = settings.rag_confidence_threshold
        self.owner_lookup = owner_lookup
        self.reranker = reranker
        if llm is None:
            from .llm_provider import build_llm

            llm = build_llm(settings, base_url=ollama_url)
        self.llm = llm
        if token_counter is None:
            # The LLM client's counter shares the calibration its generations feed.
            make_counter = getattr(llm, "token_counter", None)
            if make_counter is not None:
                token_counter = make_counter()
            else:
                from .tokens import TokenCounter

                token_counter = TokenCounter(base_url=self.ollama_url)
        self.token_counter = token_counter

    def count_fn(self, model: str) -> Callable[[str], int]:
        """TokenCounter.count for this model: exact when cached, calibrated estimate otherwise."""
        return functools.partial(self.token_counter.count, model=model)

    # spec v3's service methods, for callers that need one stage (e.g. a search-only view)
    async def validate_model(self, model: str) -> str:
        """Allowlist, then availability on the model server (tag-aware); returns the RAG_MODELS name."""
        return await self.llm.validate_model(model)

    async def get_quality_context(
        self, query: str, user_tags: Sequence[str], tenant_id: str = "default", max_chunks: int = 5
    ) -> list[SearchResult]:
        return await get_quality_context(
            self.vector_service,
            query=query,
            user_tags=user_tags,
            tenant_id=tenant_id,
            settings=self.settings,
            max_chunks=max_chunks,
            reranker=self.reranker,
        )

    async def get_route_target(
        self,
        context_results: Sequence[SearchResult],
        *,
        tenant_id: str = "default",
        confidence: int | None = None,
        why: str | None = None,
    ) -> RouteTarget:
        return await get_route_target(
            context_results,
            owner_lookup=self.owner_lookup,
            admin_email=self.settings.rag_admin_email,
            tenant_id=tenant_id,
            confidence=confidence,
            why=why,
        )

    async def generate(self, request: RAGRequest) -> RAGResponse:
        """Run the whole pipeline and return the response (the stream, consumed)."""
        final: RAGResponse | None = None
        async for event in self.stream(request):
            if isinstance(event, FinalEvent):
                final = event.response
        assert final is not None, "stream() always ends with a FinalEvent or raises"
        return final

    async def stream(self, request: RAGRequest) -> AsyncIterator[StreamEvent]:
        """StageEvent("searching") → ContextEvent → StageEvent("generating") → TokenEvent* →
        StageEvent("rating") → FinalEvent. The concatenated TokenEvents are always the answer.

        LLM failures are raised after the tokens already yielded, so the caller keeps the partial
        text and the ContextEvent's passages (the chunks in the prompt). Short cuts: zero context
        gives searching → ContextEvent(()) → TokenEvent(answer) → FinalEvent; small talk gives
        TokenEvent(reply) → FinalEvent. Every log line of the run carries the request id.
        """
        request_id = request.request_id or uuid.uuid4().hex
        token = request_id_var.set(request_id)
        try:
            async for event in self._stream(request, request_id):
                yield event
        finally:
            try:
                request_id_var.reset(token)
            except ValueError:
                # Closed from another context (an abandoned stream finalised by the loop):
                # there is nothing of ours to restore there.
                pass

    async def _stream(self, request: RAGRequest, request_id: str) -> AsyncIterator[StreamEvent]:
        start = time.perf_counter()
        timings: dict[str, float] = {key: 0.0 for key in TIMING_KEYS}
        history = list(request.chat_history or [])

        reply = detect_smalltalk(request.query)
        if reply is not None:
            logger.info("smalltalk answered directly", extra={"event": "rag_smalltalk"})
            yield TokenEvent(reply)
            yield FinalEvent(
                self._smalltalk_response(request, reply, start=start, timings=timings, request_id=request_id)
            )
            return

        # 1. Validate model (allowlist, then availability in Ollama, tag-aware). An allowed model
        # that Ollama cannot serve right now does not stop retrieval: the caller still gets the
        # passages (ContextEvent) to show as cited search results, then the error.
        model_error: RAGServiceError | None = None
        try:
            model = await self.llm.validate_model(request.model or self.default_model)
        except (LLMConnectionError, ModelUnavailableError) as e:
            model_error = e
            model = self.settings.allowlisted_model(request.model or self.default_model) or self.default_model

        # 2. Retrieve quality context
        if request.retrieval_query:
            retrieval_query, strategy = request.retrieval_query, request.query_strategy
        else:
            retrieval_query, strategy = build_retrieval_query(query=request.query, history=history)
        retrieval_query, glossary_terms = expand_query(retrieval_query, request.glossary)
        if glossary_terms:
            strategy = f"{strategy} + glossary"
        logger.info(
            "retrieving context",
            extra={"event": "rag_search", "query_strategy": strategy, "model": model, "tenant_id": request.tenant_id},
        )
        yield StageEvent("searching")
        results = await self._retrieve(request, retrieval_query, timings)
        extra: dict[str, Any] = {
            "timings": timings,
            "query_strategy": strategy,
            "retrieval_query": retrieval_query,
            "request_id": request_id,
            "glossary_terms": glossary_terms,
        }
        if not results:
            logger.info("no context: insufficient-context response", extra={"event": "rag_zero_context"})
            for event in self._insufficient_context_events(model=model, start=start, extra=extra):
                yield event
            return

        # 3. Token budget: system prompt + question are fixed; history and chunks are cut to fit.
        budget = TokenBudget(model, self.settings)
        fixed_part = RAG_SYSTEM_PROMPT.format(context="", chat_history="") + "\n" + request.query
        _, history_str, chunks = budget.allocate(fixed_part, history, results, self.count_fn(model))
        logger.info(
            "token budget applied",
            extra={
                "event": "rag_budget",
                "chunks_retrieved": len(results),
                "chunks_in_prompt": len(chunks),
                "context_tokens": budget.context_tokens,
                "history_tokens": budget.history_tokens,
            },
        )
        if not chunks:
            # Every chunk was over the budget: answering without context would be ungrounded.
            logger.warning("no chunk fits the token budget", extra={"event": "rag_budget_empty"})
            for event in self._insufficient_context_events(model=model, start=start, extra=extra):
                yield event
            return

        # The passages the answer may cite (and the asker may see), also if generation fails.
        yield ContextEvent(tuple(chunks))
        if model_error is not None:
            logger.warning(
                "model unavailable, passages only: %s",
                model_error,
                extra={"event": "rag_model_unavailable", "error_type": type(model_error).__name__},
            )
            raise model_error

        # 4. Prompt with SourceIds
        messages = [
            ChatMessage(
                role="system",
                content=RAG_SYSTEM_PROMPT.format(context=build_context(chunks), chat_history=history_str),
            ),
            ChatMessage(role="user", content=request.query),
        ]

        # 5. Generate by streaming
        yield StageEvent("generating")
        parts: list[str] = []
        gen_start = time.perf_counter()
        # An answer that opens like "I don't know" is held until its first sentence ends
        # (declines.py): if it declines while a passage holds most of the question's words, the
        # model gets a second look at those passages alone, and the asker sees only that answer.
        gate = DeclineGate()
        try:
            async for piece in self._answer_pieces(messages, model, chunks):
                if shown := gate.feed(piece):
                    parts.append(shown)
                    yield TokenEvent(shown)
            if shown := gate.finish():
                parts.append(shown)
                yield TokenEvent(shown)
            if gate.declined:
                strong = strong_passages(chunks, (request.query, retrieval_query))
                again = DeclineGate()
                if strong:
                    logger.info(
                        "the model declined: a second look at %d passage(s)",
                        len(strong),
                        extra={"event": "rag_second_look", "passages": len(strong)},
                    )
                    focused = [
                        ChatMessage(
                            role="system",
                            content=RAG_SYSTEM_PROMPT.format(context=build_context(strong), chat_history=history_str),
                        ),
                        messages[1],
                    ]
                    async for piece in self._answer_pieces(focused, model, strong):
                        if shown := again.feed(piece):
                            parts.append(shown)
                            yield TokenEvent(shown)
                    if shown := again.finish():
                        parts.append(shown)
                        yield TokenEvent(shown)
                if not strong or again.declined:
                    # Still "I don't know": the first answer as the model wrote it.
                    parts.append(gate.held)
                    yield TokenEvent(gate.held)
            if not "".join(parts).strip():
                # Nothing but thinking (or nothing at all): an error with the passages kept, not
                # an empty answer rated and routed.
                raise EmptyAnswerError(f"The model {model} wrote no answer")
        except RAGServiceError as e:
            # What was held back is shown with the error (the partial answer, whole).
            if gate.held and not parts:
                parts.append(gate.held)
                yield TokenEvent(gate.held)
            logger.warning(
                "generation failed after %d chars: %s",
                sum(map(len, parts)),
                e,
                extra={"event": "rag_generate_failed", "error_type": type(e).__name__},
            )
            raise
        finally:
            timings["generate"] = _elapsed_ms(gen_start)
        answer = "".join(parts)
        logger.info(
            "answer generated",
            extra={"event": "rag_generate", "answer_chars": len(answer), "generate_ms": timings["generate"]},
        )

        # 6. Citations (deterministic) and grounded
        yield StageEvent("rating")
        citations = extract_citations(answer, chunks)
        # 6b. Grounding per sentence (A2): each sentence against what it cites and the rest.
        grounding = check_answer(answer, chunks)

        # 7. Hybrid confidence
        llm_score = await self._rate(request.query, answer, chunks, model, timings)
        confidence = calculate_confidence(
            chunks, answer, coverage_context(chunks), llm_score, supported_share=grounding.supported_share
        )

        # 8. Action and route target: cited or routed, whatever the model wrote. Under the
        # threshold, without a valid citation, or citing passages that hold few of the question's
        # words (an answer about something else), the question goes to a person.
        cited_ids = {c.source_id for c in citations}
        focus = question_focus(
            (request.query, retrieval_query), [c.chunk_text for c in chunks if c.source_id in cited_ids]
        )
        action, why = answer_action(
            confidence.overall,
            self.confidence_threshold,
            cited=bool(citations),
            focus=focus,
            figure=answers_with_a_figure(request.query, answer),
        )
        route_to = None
        if action == "ROUTE":
            route_to = await self.get_route_target(
                chunks, tenant_id=request.tenant_id, confidence=confidence.overall, why=why
            )

        # 9. Response
        response = RAGResponse(
            answer=answer,
            confidence=confidence,
            citations=citations,
            action=action,
            route_to=route_to,
            model_used=model,
            context_chunks_used=len(chunks),
            context_tokens_used=budget.context_tokens,
            generation_time_ms=_elapsed_ms(start),
            grounded=len(citations) > 0,
            context=list(chunks),
            grounding=grounding,
            **extra,
        )
        logger.info(
            "rag response ready",
            extra={
                "event": "rag_done",
                "action": action,
                "confidence": confidence.overall,
                "citations": len(citations),
                "citations_attributed": sum(1 for c in citations if c.attributed),
                "grounded": response.grounded,
                "supported_sentences": f"{grounding.supported}/{grounding.claims}",
                "route_tag": route_to.tag if route_to else None,
                "timings": timings,
                "total_ms": response.generation_time_ms,
            },
        )
        yield FinalEvent(response)

    def _insufficient_context_events(
        self, *, model: str, start: float, extra: dict[str, Any]
    ) -> tuple[StreamEvent, ...]:
        """Spec v3 zero-context short-circuit as stream events: no passages, the fixed answer, done."""
        response = insufficient_context_response(
            settings=self.settings, model=model, elapsed_ms=_elapsed_ms(start), **extra
        )
        return ContextEvent(()), TokenEvent(response.answer), FinalEvent(response)

    async def embed_ahead(self, query: str) -> None:
        """Embed now the text a search for this new question will most likely embed, so that the
        model works while the caller still prepares the turn (stores the question, reads the
        history): a question that is no follow-up is searched as it stands (standalone_query), and
        the embedder's cache then holds it, or the search waits for this same embedding. Small
        talk is never searched; a follow-up's search text depends on the history, and a glossary
        term in the question adds words to it: those embed their own text when they search."""
        if detect_smalltalk(query) is not None:
            return
        text = standalone_query(query)
        if text is not None:
            await self.vector_service.embedder.embed_query(text)

    async def _retrieve(
        self, request: RAGRequest, retrieval_query: str, timings: dict[str, float]
    ) -> list[SearchResult]:
        try:
            return await get_quality_context(
                self.vector_service,
                query=retrieval_query,
                user_tags=request.user_tags,
                tenant_id=request.tenant_id,
                settings=self.settings,
                max_chunks=request.max_context_chunks,
                reranker=self.reranker,
                timings=timings,
            )
        except ContextError:
            raise
        except Exception as e:  # the vector store's own failures reach callers as ContextError
            raise ContextError(f"Context retrieval failed: {e}") from e

    async def _answer_pieces(
        self, messages: list[ChatMessage], model: str, chunks: Sequence[SearchResult]
    ) -> AsyncIterator[str]:
        """The model's answer as the asker may see it, piece by piece. Real models' habits are
        undone before anyone sees a token: thinking written into the content is dropped, citations
        written their own way become "[SourceId: …]" and invented ones go (the numbers count
        `chunks`, the prompt's passages). Then a sentence that a passage supports but that cites
        none gets that passage's citation, attributed by ragchat (attribution.py), as soon as the
        sentence has ended. What is yielded is what is stored, counted and checked. If the stream
        fails, the partial answer is yielded whole (its last sentence perhaps cut off: not
        attributed) before the error."""
        think = ThinkFilter()
        cites = CitationNormalizer(chunks)
        attribute = CitationAttributor(chunks)
        try:
            async for raw in self._guarded_stream(messages, model):
                if piece := attribute.feed(cites.feed(think.feed(raw))):
                    yield piece
        except RAGServiceError:
            if rest := attribute.feed(cites.feed(think.finish()) + cites.finish()) + attribute.finish(complete=False):
                yield rest
            raise
        if piece := attribute.feed(cites.feed(think.finish()) + cites.finish()) + attribute.finish():
            yield piece

    async def _guarded_stream(self, messages: list[ChatMessage], model: str) -> AsyncIterator[str]:
        """The LLM's token stream, with a stall guard: no token for RAG_TIMEOUT_SECONDS (plus a
        little grace for the client's own timeout to fire first) raises LLMTimeoutError."""
        limit = self.settings.rag_timeout_seconds + _STALL_GRACE_SECONDS
        iterator = self.llm.stream(messages=messages, model=model).__aiter__()
        try:
            while True:
                try:
                    # A timeout scope, not wait_for: wait_for runs every token's read as a task of its own.
                    async with asyncio.timeout(limit):
                        token = await iterator.__anext__()
                except StopAsyncIteration:
                    return
                except TimeoutError as e:
                    raise LLMTimeoutError(
                        f"No output from the model for {self.settings.rag_timeout_seconds:g} s"
                    ) from e
                if token:
                    yield token
        finally:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except Exception:  # closing a broken stream must not mask the real error
                    logger.debug("closing the LLM stream failed", exc_info=True)

    async def _rate(
        self,
        query: str,
        answer: str,
        chunks: Sequence[SearchResult],
        model: str,
        timings: dict[str, float],
    ) -> int:
        """LLM self-assessment (CONFIDENCE_PROMPT); a failed rating scores 0 and keeps the answer."""
        prompt = CONFIDENCE_PROMPT.format(context_summary=context_summary(chunks), query=query, answer=answer)
        rate_start = time.perf_counter()
        try:
            score = await asyncio.wait_for(
                self.llm.rate(prompt=prompt, model=model),
                timeout=self.settings.rag_timeout_seconds + _STALL_GRACE_SECONDS,
            )
            return min(100, max(0, int(score)))
        except Exception as e:  # the answer is already streamed; a missing rating only lowers confidence
            logger.warning(
                "confidence rating failed, llm_score=0: %s",
                e,
                extra={"event": "rag_rate_failed", "error_type": type(e).__name__},
            )
            return 0
        finally:
            timings["rate"] = _elapsed_ms(rate_start)

    def _smalltalk_response(
        self,
        request: RAGRequest,
        reply: str,
        *,
        start: float,
        timings: dict[str, float],
        request_id: str,
    ) -> RAGResponse:
        """A greeting or thanks: answered directly, confident, never routed, not grounded."""
        return RAGResponse(
            answer=reply,
            confidence=ConfidenceScore(overall=100, retrieval_score=0.0, coverage_score=0.0, llm_score=0),
            citations=[],
            action="CITE",
            route_to=None,
            model_used=request.model or self.default_model,
            context_chunks_used=0,
            context_tokens_used=0,
            generation_time_ms=_elapsed_ms(start),
            grounded=False,
            timings=timings,
            query_strategy=STRATEGY_SMALLTALK,
            retrieval_query="",
            request_id=request_id,
        )

    async def health_check(self) -> dict[str, Any]:
        """Ollama (reachable, models present, latency) and vector store counts, as one document."""
        try:
            ollama = await self.llm.health()
        except Exception as e:  # health reports failures, it does not raise them
            ollama = {"reachable": False, "error": str(e)}
        try:
            vector_store = await self.vector_service.stats()
            vector_store = {"ok": True, **vector_store}
        except Exception as e:
            vector_store = {"ok": False, "error": str(e)}
        ollama_ok = ollama.get("ok", ollama.get("reachable"))
        healthy = bool(ollama_ok) and bool(vector_store.get("ok"))
        return {
            "status": "ok" if healthy else "degraded",
            "ollama": ollama,
            "vector_store": vector_store,
            "default_model": self.default_model,
        }
