"""RAGService end to end: langchain-ollama against the fake Ollama server (tests/fakes, real HTTP)
and the real embedded Qdrant Edge index in tmp_path with the fast hashing embedder.
Spec v3 "Testing Requirements" → Integration Tests, by name, plus the pipeline's failure modes.

References: "spec v3": docs/specs/rag-service-spec-v3-FINAL.md.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from dataclasses import replace

import pytest

from ragchat.services.citations import build_context
from ragchat.services.confidence import calculate_confidence, coverage_context
from ragchat.services.config import RAGSettings
from ragchat.services.embeddings import CachedEmbedder, HashingEmbedder
from ragchat.services.errors import (
    LLMConnectionError,
    LLMResponseError,
    LLMTimeoutError,
    ModelNotAllowedError,
    ModelUnavailableError,
    RAGServiceError,
)
from ragchat.services.prompts import INSUFFICIENT_CONTEXT_ANSWER
from ragchat.services.rag_service import RAGService
from ragchat.services.retrieval import STRATEGY_FIRST, STRATEGY_FOLLOW_UP
from ragchat.services.tokens import Calibration, TokenCounter
from ragchat.services.types import (
    ChatMessage,
    ChunkRecord,
    ContextEvent,
    FinalEvent,
    RAGRequest,
    StageEvent,
    TagOwner,
    TokenEvent,
)
from ragchat.services.vector_store import VectorService

TIMEOUT = 2.0  # RAG_TIMEOUT_SECONDS for these tests (a busy 2-core machine may delay a piece by a second)
ADMIN = "admin@company.com"


def doc_id(n: int) -> str:
    return str(uuid.UUID(int=n, version=4))


VACATION, CARRYOVER, CONTRACTORS, EXPENSES, ACME_SALARY, GLOBEX_SALARY = (
    doc_id(1), doc_id(2), doc_id(3), doc_id(4), doc_id(5), doc_id(6)
)  # fmt: skip


def chunk(
    doc: str, index: int, name: str, text: str, tags: tuple[str, ...], tenant: str = "default", **kw
) -> ChunkRecord:
    return ChunkRecord(doc, index, name, text, tags, tenant_id=tenant, **kw)


CORPUS = [
    chunk(
        VACATION,
        0,
        "vacation.md",
        "Vacation policy: full-time employees get twenty five vacation days of paid leave per calendar year.",
        ("hr",),
        page_number=1,
        section="Leave",
    ),
    chunk(
        VACATION,
        1,
        "vacation.md",
        "Vacation days are requested in the HR portal at least two weeks before the first day off.",
        ("hr",),
        page_number=2,
        section="Leave",
    ),
    chunk(
        CARRYOVER,
        0,
        "carryover.md",
        "Unused vacation days can be carried over until the end of March of the following year.",
        ("hr", "public"),
    ),
    chunk(
        CONTRACTORS,
        0,
        "contractors.md",
        "Contractors must sign the confidentiality agreement and return their badge when the engagement ends.",
        ("legal",),
    ),
    chunk(
        EXPENSES,
        0,
        "expenses.md",
        "Expense reports must be filed within thirty days with receipts attached.",
        ("finance",),
    ),
    chunk(
        ACME_SALARY,
        0,
        "acme-salaries.md",
        "Acme salary bands for engineers are reviewed every spring by the acme board.",
        ("hr",),
        tenant="acme",
    ),
    chunk(
        GLOBEX_SALARY,
        0,
        "globex-salaries.md",
        "Globex salary bands for engineers are reviewed every autumn by the globex council.",
        ("hr",),
        tenant="globex",
    ),
]
VACATION_Q = "How many vacation days do employees get?"


@pytest.fixture
def rag_settings(tmp_path, ollama_url) -> RAGSettings:
    return RAGSettings(
        ollama_base_url=ollama_url,
        qdrant_path=str(tmp_path / "qdrant"),
        embedding_backend="hashing",
        embedding_model="hashing-384",
        rag_timeout_seconds=TIMEOUT,
        rag_retry_initial_delay=0.01,
        rag_retry_max_delay=0.05,
        # The hashing embedder's cosine scale is lower than a semantic model's; the 0.3 floor is
        # unit-tested, here it would leave one chunk per question.
        rag_min_similarity_score=0.05,
    )


@pytest.fixture
async def vector(rag_settings):
    service = VectorService(rag_settings, CachedEmbedder(HashingEmbedder()))
    await service.initialize()
    await service.upsert_chunks(CORPUS)
    yield service
    await service.close()


@pytest.fixture
def owners() -> dict[tuple[str, str], TagOwner]:
    """What the app's tag-owner lookup knows: (tag, tenant) -> owner. Tests fill it."""
    return {}


@pytest.fixture
def rag(vector, rag_settings, owners) -> RAGService:
    async def owner_lookup(tag: str, tenant_id: str) -> TagOwner | None:
        return owners.get((tag, tenant_id))

    return RAGService(vector, rag_settings, owner_lookup=owner_lookup)


def cite(fake, n: int) -> None:
    """Make the fake answer citing the first n context chunks (the fake reads the chunk headers of
    the system prompt, not the example id of spec rule 4)."""
    fake.reply_citing(n)


def chat_requests(fake) -> list[dict]:
    """Bodies of the answer requests (not the confidence rating) the fake received."""
    bodies = [r.body for r in fake.requests_to("/api/chat")]
    return [b for b in bodies if "Rate the support level" not in str(b.get("messages"))]


def system_prompt_sent(fake) -> str:
    (body,) = chat_requests(fake)
    return next(m["content"] for m in body["messages"] if m["role"] == "system")


async def collect(rag: RAGService, request: RAGRequest) -> tuple[list, list[str], BaseException | None]:
    events, tokens, error = [], [], None
    try:
        async for event in rag.stream(request):
            events.append(event)
            if isinstance(event, TokenEvent):
                tokens.append(event.text)
    except BaseException as e:  # noqa: BLE001 - the test inspects what was raised
        error = e
    return events, tokens, error


# ---------------------------------------------------------------- spec v3 integration table


async def test_generate_full_pipeline(rag, fake_ollama):
    cite(fake_ollama, 2)
    fake_ollama.rating(90)
    response = await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr"]))

    assert response.action == "CITE" and response.route_to is None
    assert response.grounded is True
    context_ids = [r.source_id for r in response.context]
    assert f"{VACATION}:0" in context_ids
    assert all(r.tenant_id == "default" and set(r.tags) & {"hr", "public"} for r in response.context)
    cited = [c.source_id for c in response.citations]
    assert len(cited) >= 2 and cited == context_ids[: len(cited)]  # the fake cites the first ones
    first = response.citations[0]
    assert first.document_name and first.snippet and first.relevance_score > 0
    assert response.model_used == "llama3.2"
    assert response.context_chunks_used == len(response.context) >= 2
    assert 0 < response.context_tokens_used <= RAGSettings().rag_max_context_tokens
    # confidence is the spec's hybrid formula over the chunks in the prompt
    expected = calculate_confidence(response.context, response.answer, coverage_context(response.context), 90)
    assert response.confidence == expected
    assert response.confidence.llm_score == 90 and response.confidence.overall >= 60
    # the prompt: spec system prompt with SourceId context blocks, the question as the user message
    (body,) = chat_requests(fake_ollama)
    system, user = body["messages"][0], body["messages"][-1]
    assert system["role"] == "system" and user == {"role": "user", "content": VACATION_Q} | {
        k: v for k, v in user.items() if k not in ("role", "content")
    }
    assert system["content"].startswith(
        "You are a helpful assistant that answers questions based ONLY on the provided context."
    )
    assert build_context(response.context) in system["content"]
    assert body.get("stream") is True
    # timings of every stage, request id, strategy
    assert set(response.timings) >= {"embed", "search", "generate", "rate"}
    assert all(response.timings[k] > 0 for k in ("embed", "search", "generate", "rate"))
    assert response.generation_time_ms >= response.timings["generate"]
    assert response.request_id
    assert response.query_strategy == STRATEGY_FIRST and response.retrieval_query == VACATION_Q


class CountingHashing(HashingEmbedder):
    """The hashing model, recording the queries it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    async def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return await super().embed_query(text)


async def test_a_question_embedded_ahead_is_searched_without_embedding_it_again(rag_settings, fake_ollama):
    """RAGService.embed_ahead (what a chat turn calls while it stores the question): a question that
    stands alone is embedded once, ahead, and its search finds it in the cache; small talk and a
    follow-up, whose search text the history decides, are not embedded ahead."""
    model = CountingHashing()
    vector = VectorService(rag_settings, CachedEmbedder(model))
    await vector.initialize()
    await vector.upsert_chunks(CORPUS)
    rag = RAGService(vector, rag_settings)
    try:
        await rag.embed_ahead(VACATION_Q)
        assert model.queries == [VACATION_Q]
        cite(fake_ollama, 1)
        response = await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr"]))
        assert response.retrieval_query == VACATION_Q and response.context
        assert model.queries == [VACATION_Q]
        await rag.embed_ahead("thanks!")
        await rag.embed_ahead("And for contractors?")
        assert model.queries == [VACATION_Q]
    finally:
        await vector.close()


@pytest.mark.parametrize(
    "case", ["nothing readable", "nothing over the similarity floor", "gibberish", "off-topic at the 0.3 floor"]
)
async def test_generate_zero_context(vector, rag_settings, fake_ollama, case):
    if case == "nothing readable":  # a tenant without documents: the vector service returns none
        rag = RAGService(vector, rag_settings)
        request = RAGRequest(query=VACATION_Q, user_tags=["hr"], tenant_id="empty-tenant")
    elif case == "nothing over the similarity floor":
        # Candidates come back, but all under RAG_MIN_SIMILARITY_SCORE, and none holds most of
        # the question's words ("vacation" alone is a weak match).
        rag = RAGService(vector, replace(rag_settings, rag_min_similarity_score=0.99))
        request = RAGRequest(query="Which vacation rules apply to interns abroad?", user_tags=["hr"])
    elif case == "gibberish":
        rag = RAGService(vector, replace(rag_settings, rag_min_similarity_score=0.99))
        request = RAGRequest(query="asdf qwerty zxcv", user_tags=["hr", "legal", "finance"])
    else:
        rag = RAGService(vector, replace(rag_settings, rag_min_similarity_score=0.3))
        request = RAGRequest(query="What is the capital of France?", user_tags=["hr", "legal", "finance"])
    response = await rag.generate(request)
    assert response.answer == INSUFFICIENT_CONTEXT_ANSWER
    assert (
        response.confidence.overall,
        response.confidence.retrieval_score,
        response.confidence.coverage_score,
        response.confidence.llm_score,
    ) == (0, 0.0, 0.0, 0)
    assert response.citations == [] and response.grounded is False
    assert response.action == "ROUTE"
    route = response.route_to
    assert (route.tag, route.owner_user_id, route.owner_email, route.reason, route.fallback) == (
        "system", None, ADMIN, "No relevant documents found", True,
    )  # fmt: skip
    assert (response.context_chunks_used, response.context_tokens_used) == (0, 0)
    assert response.model_used == "llama3.2"
    # short-circuit: no generation, no rating
    assert fake_ollama.requests_to("/api/chat") == [] and fake_ollama.requests_to("/api/generate") == []


async def test_a_strong_keyword_match_under_the_similarity_floor_reaches_the_prompt(vector, rag_settings, fake_ollama):
    # The question's words are the passage's words, but its cosine is under the floor (0.99 here;
    # with a small embedding model "When does the fiscal year start?" scored 0.24 against "The
    # fiscal year runs from 1 April"): it is answered from the passage, not "I don't know".
    rag = RAGService(vector, replace(rag_settings, rag_min_similarity_score=0.99))
    fake_ollama.reply_citing(1)
    response = await rag.generate(RAGRequest(query="When are unused vacation days carried over?", user_tags=["hr"]))
    assert response.answer != INSUFFICIENT_CONTEXT_ANSWER
    assert [c.document_id for c in response.context] == [CARRYOVER]
    assert response.context[0].score < 0.99 and response.citations[0].document_id == CARRYOVER


async def test_generate_low_confidence_routes(rag, fake_ollama, owners):
    owners[("hr", "default")] = TagOwner(user_id="42", email="hr.owner@company.com")
    fake_ollama.reply("The cafeteria serves pizza on Fridays.")
    fake_ollama.rating(10)
    response = await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    assert response.confidence.overall < 60
    assert response.action == "ROUTE"
    assert response.grounded is False
    route = response.route_to
    assert (route.tag, route.owner_user_id, route.owner_email, route.fallback) == (
        "hr",
        "42",
        "hr.owner@company.com",
        False,
    )
    assert route.reason == f"Low confidence: {response.confidence.overall}% - routing to hr owner"


async def test_an_uncited_answer_is_routed_however_confident(rag, fake_ollama, owners):
    # A one-word answer states nothing a passage could support: no citation, not even attributed.
    owners[("hr", "default")] = TagOwner(user_id="42", email="hr.owner@company.com")
    fake_ollama.reply("Vacation.")
    fake_ollama.rating(95)
    response = await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    assert response.citations == []
    assert response.confidence.overall >= 60, "confident: the spec's threshold alone would cite it"
    assert response.action == "ROUTE"
    assert response.route_to.reason == "No passage cited - routing to hr owner"


async def test_an_answer_citing_passages_off_the_question_is_routed(rag, fake_ollama, owners):
    # A careful extracting model quotes the closest sentence, with its citation; the question asks
    # about something no passage holds (a wedding), so the quote answers another question.
    owners[("hr", "default")] = TagOwner(user_id="42", email="hr.owner@company.com")
    fake_ollama.reply_from_context(cite=True)
    fake_ollama.rating(95)
    question = "Do interns get leave for their wedding abroad?"
    response = await rag.generate(RAGRequest(query=question, user_tags=["hr"]))
    assert response.citations, response.answer
    assert response.confidence.overall >= 60
    assert response.action == "ROUTE"
    assert response.route_to.reason == "The cited passages hold few of the question's words - routing to hr owner"
    # the same model on a question its passage answers is cited, not routed
    response = await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    assert (response.action, bool(response.citations)) == ("CITE", True)


async def test_an_answer_without_the_figure_asked_for_is_routed(rag, fake_ollama, owners):
    # "How many…?" answered with a true sentence of the right passage that states no figure.
    owners[("hr", "default")] = TagOwner(user_id="42", email="hr.owner@company.com")
    fake_ollama.reply("Full-time employees get vacation days of paid leave every calendar year.")
    fake_ollama.rating(95)
    response = await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    assert response.citations and response.confidence.overall >= 60
    assert response.action == "ROUTE"
    assert response.route_to.reason == "The question asks for a figure and the answer states none - routing to hr owner"


async def test_generate_token_budget(rag, fake_ollama, rag_settings, vector):
    cite(fake_ollama, 1)
    history = []
    for i in range(120):
        history.append(ChatMessage("user", f"question number {i} " + "about the leave rules " * 10))
        history.append(ChatMessage("assistant", f"answer number {i} " + "the rules say this and that " * 10))
    await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr"], chat_history=history))
    system = system_prompt_sent(fake_ollama)
    kept = system.split("PREVIOUS CONVERSATION:\n", 1)[1]
    assert "answer number 119 " in kept  # newest kept
    assert "question number 0 " not in kept  # oldest dropped
    numbers = [int(n) for n in re.findall(r"(?:question|answer) number (\d+) ", kept)]
    assert numbers == sorted(numbers) and numbers[-1] == 119  # one contiguous recent stretch
    counter = rag.token_counter
    assert counter.count(kept.strip(), model="llama3.2") <= rag_settings.rag_max_history_tokens + len(numbers)
    counter = TokenCounter("llama3.2", calibration=Calibration())  # uncalibrated: len/4, stable

    # A tight context budget keeps the best-scored chunks and drops the lowest-scored first.
    fake_ollama.reset()
    cite(fake_ollama, 1)
    full = await RAGService(vector, rag_settings, token_counter=counter).generate(
        RAGRequest(query=VACATION_Q, user_tags=["hr"])
    )
    best = max(full.context, key=lambda r: r.score)
    tight_settings = replace(rag_settings, rag_max_context_tokens=counter.count(best.chunk_text, model="llama3.2") + 5)
    fake_ollama.reset()
    cite(fake_ollama, 1)
    tight = await RAGService(vector, tight_settings, token_counter=counter).generate(
        RAGRequest(query=VACATION_Q, user_tags=["hr"])
    )
    assert len(full.context) > 1
    assert [r.source_id for r in tight.context] == [best.source_id]
    assert tight.context_chunks_used == 1


async def test_health_check(rag, fake_ollama):
    health = await rag.health_check()
    assert health["status"] == "ok"
    assert health["ollama"]["reachable"] is True
    assert health["vector_store"]["points"] == len(CORPUS)
    assert health["vector_store"]["documents"] == len({c.document_id for c in CORPUS})
    assert health["vector_store"]["dimension"] == 384
    fake_ollama.refuse_connections()
    down = await rag.health_check()
    assert down["status"] == "degraded"
    assert down["ollama"]["reachable"] is False
    assert down["vector_store"]["points"] == len(CORPUS)


async def test_model_override(rag, fake_ollama):
    cite(fake_ollama, 1)
    response = await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr"], model="qwen3:8b"))
    assert response.model_used == "qwen3:8b"
    (body,) = chat_requests(fake_ollama)
    assert body["model"] == "qwen3:8b"
    assert "<think>" not in response.answer
    with pytest.raises(ModelNotAllowedError):
        await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr"], model="gpt-4o"))
    with pytest.raises(ModelUnavailableError):  # allowlisted, but not pulled in Ollama
        await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr"], model="deepseek-r1:32b"))


async def test_tenant_isolation(rag, fake_ollama):
    cite(fake_ollama, 3)
    question = "How are salary bands for engineers reviewed?"
    globex = await rag.generate(RAGRequest(query=question, user_tags=["hr"], tenant_id="globex"))
    assert [r.document_id for r in globex.context] == [GLOBEX_SALARY]
    assert all(r.tenant_id == "globex" for r in globex.context)
    assert "acme" not in system_prompt_sent(fake_ollama).lower()
    fake_ollama.reset()
    cite(fake_ollama, 3)
    acme = await rag.generate(RAGRequest(query=question, user_tags=["hr"], tenant_id="acme"))
    assert [r.document_id for r in acme.context] == [ACME_SALARY]
    nobody = await rag.generate(RAGRequest(query=question, user_tags=["hr"], tenant_id="initech"))
    assert nobody.answer == INSUFFICIENT_CONTEXT_ANSWER


# ---------------------------------------------------------------- streaming and failures


async def test_stream_event_order(rag, fake_ollama):
    cite(fake_ollama, 2)
    events, tokens, error = await collect(rag, RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    assert error is None
    kinds = [type(e).__name__ if not isinstance(e, StageEvent) else e.stage for e in events]
    n_tokens = kinds.count("TokenEvent")
    assert n_tokens > 3  # streamed piece by piece, not as one block
    assert kinds == ["searching", "ContextEvent", "generating"] + ["TokenEvent"] * n_tokens + ["rating", "FinalEvent"]
    final = events[-1].response
    assert "".join(tokens) == final.answer
    context_event = next(e for e in events if isinstance(e, ContextEvent))
    assert [r.source_id for r in context_event.results] == [r.source_id for r in final.context]


async def test_stream_zero_context_and_smalltalk_tokens_are_the_answer(rag, fake_ollama):
    for request in (
        RAGRequest(query=VACATION_Q, user_tags=["hr"], tenant_id="empty-tenant"),
        RAGRequest(query="hello there", user_tags=["hr"]),
    ):
        events, tokens, error = await collect(rag, request)
        assert error is None and isinstance(events[-1], FinalEvent)
        assert "".join(tokens) == events[-1].response.answer


async def test_llm_down_raises_connection_error(rag, fake_ollama):
    fake_ollama.refuse_connections()
    started = time.monotonic()
    with pytest.raises(LLMConnectionError):
        await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    assert time.monotonic() - started < TIMEOUT + 4


async def test_llm_down_still_yields_passages_before_the_error(rag, fake_ollama):
    """Ollama down from the start (the model check fails): retrieval still runs, so the caller can
    show the passages as cited search results, and the error comes at once, not after retries."""
    fake_ollama.refuse_connections()
    started = time.monotonic()
    events, tokens, error = await collect(rag, RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    assert isinstance(error, LLMConnectionError)
    assert tokens == []
    passages = [e for e in events if isinstance(e, ContextEvent)]
    assert passages and passages[0].results
    assert all("hr" in r.tags or "public" in r.tags for r in passages[0].results)
    assert time.monotonic() - started < 1.0


async def test_unknown_model_still_yields_passages_before_the_error(rag, fake_ollama):
    fake_ollama.models(["qwen3:8b"])  # the default llama3.2 is not pulled
    events, tokens, error = await collect(rag, RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    assert isinstance(error, ModelUnavailableError)
    assert any(isinstance(e, ContextEvent) and e.results for e in events)


async def test_llm_slow_first_token_times_out(rag, fake_ollama):
    fake_ollama.first_token_delay(30)
    started = time.monotonic()
    events, tokens, error = await collect(rag, RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    elapsed = time.monotonic() - started
    assert isinstance(error, LLMTimeoutError)
    assert tokens == []
    assert any(isinstance(e, ContextEvent) and e.results for e in events)  # passages still shown
    assert elapsed < TIMEOUT + 3  # bounded by RAG_TIMEOUT_SECONDS, not the 30 s delay


async def test_llm_stall_mid_stream_keeps_partial_answer(rag, fake_ollama):
    fake_ollama.reply("Employees get twenty five vacation days of paid leave per calendar year.")
    fake_ollama.stall_after(4, 30)
    started = time.monotonic()
    events, tokens, error = await collect(rag, RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    elapsed = time.monotonic() - started
    assert isinstance(error, LLMTimeoutError)
    assert "".join(tokens) == "Employees get "  # the 4 pieces (words and spaces) before the stall
    assert not any(isinstance(e, FinalEvent) for e in events)
    assert elapsed < TIMEOUT + 3


async def test_llm_error_mid_stream_keeps_partial_answer(rag, fake_ollama):
    fake_ollama.reply("Employees get twenty five vacation days of paid leave per calendar year.")
    fake_ollama.error_mid_stream(6)
    events, tokens, error = await collect(rag, RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    assert isinstance(error, RAGServiceError)
    assert "".join(tokens) == "Employees get twenty "


async def test_llm_http_500_is_a_response_error(rag, fake_ollama):
    fake_ollama.fail_with(500, times=None, paths=("/api/chat",))
    with pytest.raises(LLMResponseError):
        await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr"]))


async def test_rating_failure_keeps_answer(rag, fake_ollama):
    cite(fake_ollama, 2)
    fake_ollama.rating("no idea")
    response = await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    assert response.grounded is True and response.answer
    assert response.confidence.llm_score == 0


# ---------------------------------------------------------------- routing, smalltalk, citations


async def test_owner_account_gone_falls_back_to_admin(rag, fake_ollama, owners):
    owners[("hr", "default")] = TagOwner(user_id="42", email=None)
    fake_ollama.reply("Nothing relevant here.")
    fake_ollama.rating(0)
    response = await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    route = response.route_to
    assert response.action == "ROUTE"
    assert (route.tag, route.owner_email, route.fallback) == ("system", ADMIN, True)
    assert route.reason == "Owner not found for tag 'hr' - routing to admin"


@pytest.mark.parametrize("message", ["hi", "Hello there!", "thanks!", "thank you so much", "good morning"])
async def test_smalltalk_answered_directly_never_routed(rag, fake_ollama, message):
    response = await rag.generate(RAGRequest(query=message, user_tags=["hr"]))
    assert response.action == "CITE" and response.route_to is None
    assert response.grounded is False and response.citations == []
    assert response.query_strategy == "smalltalk (direct reply)"
    assert response.answer
    assert fake_ollama.requests == []  # no LLM, not even a model check
    assert response.timings["embed"] == 0 and response.timings["search"] == 0  # no retrieval


async def test_greeting_with_question_goes_through_rag(rag, fake_ollama):
    cite(fake_ollama, 1)
    response = await rag.generate(RAGRequest(query="hi, how many vacation days do employees get?", user_tags=["hr"]))
    assert response.query_strategy != "smalltalk (direct reply)"
    assert response.grounded is True


async def test_follow_up_query_retrieves_topic(rag, fake_ollama):
    cite(fake_ollama, 1)
    follow_up = "does it cover contractors?"
    raw = await rag.generate(RAGRequest(query=follow_up, user_tags=["hr", "legal"]))
    assert raw.query_strategy == STRATEGY_FIRST
    assert VACATION not in {r.document_id for r in raw.context}  # alone, it says nothing of vacation
    history = [ChatMessage("user", VACATION_Q), ChatMessage("assistant", "Twenty five days.")]
    fake_ollama.reset()
    cite(fake_ollama, 1)
    response = await rag.generate(RAGRequest(query=follow_up, user_tags=["hr", "legal"], chat_history=history))
    assert response.query_strategy == STRATEGY_FOLLOW_UP
    assert "vacation" in response.retrieval_query and follow_up in response.retrieval_query
    assert response.context[0].document_id == VACATION
    # the LLM still gets the user's own words as the question
    (body,) = chat_requests(fake_ollama)
    assert body["messages"][-1]["content"] == follow_up


async def test_unknown_and_malformed_source_ids_not_cited(rag, fake_ollama):
    unknown = f"{doc_id(999)}:0"
    fake_ollama.reply_citing_ids([unknown, f"{VACATION}:0"])
    response = await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    assert [c.source_id for c in response.citations] == [f"{VACATION}:0"]
    fake_ollama.reset()
    fake_ollama.reply_text_with_malformed_ids()
    malformed = await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    assert malformed.citations == [] and malformed.grounded is False


async def test_same_question_same_context_twice(rag, fake_ollama):
    cite(fake_ollama, 2)
    first = await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr", "legal", "finance"]))
    second = await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr", "legal", "finance"]))
    assert [r.source_id for r in first.context] == [r.source_id for r in second.context]
    assert first.answer == second.answer


async def test_concurrent_requests_do_not_mix(rag, fake_ollama):
    cite(fake_ollama, 1)
    fake_ollama.token_delay(0.005)
    a, b = await asyncio.gather(
        rag.generate(
            RAGRequest(query="How are salary bands for engineers reviewed?", user_tags=["hr"], tenant_id="acme")
        ),
        rag.generate(
            RAGRequest(query="How are salary bands for engineers reviewed?", user_tags=["hr"], tenant_id="globex")
        ),
    )
    assert [c.document_id for c in a.citations] == [ACME_SALARY]
    assert [c.document_id for c in b.citations] == [GLOBEX_SALARY]
    assert a.request_id != b.request_id


async def test_llm_goes_down_after_model_check(rag, fake_ollama):
    """The model list is cached, so the failure surfaces at generation: passages already sent."""
    cite(fake_ollama, 1)
    await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    fake_ollama.refuse_connections()
    started = time.monotonic()
    events, tokens, error = await collect(rag, RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    assert isinstance(error, LLMConnectionError)
    assert tokens == []
    assert any(isinstance(e, ContextEvent) and e.results for e in events)
    assert time.monotonic() - started < TIMEOUT + 4


class KeepLastReranker:
    """A reranker at its protocol: it judges only the last candidate relevant."""

    def __init__(self):
        self.calls = []

    async def rerank(self, query, results):
        self.calls.append((query, [r.source_id for r in results]))
        return results[-1:]


class BrokenReranker:
    async def rerank(self, query, results):
        raise RuntimeError("cross-encoder failed to load")


async def test_reranker_stage_in_pipeline(vector, rag_settings, fake_ollama, caplog):
    cite(fake_ollama, 1)
    request = RAGRequest(query=VACATION_Q, user_tags=["hr"])
    plain = await RAGService(vector, rag_settings).generate(request)
    keep_last = KeepLastReranker()
    reranked = await RAGService(vector, rag_settings, reranker=keep_last).generate(request)
    broken = await RAGService(vector, rag_settings, reranker=BrokenReranker()).generate(request)
    assert len(plain.context) > 1
    ((query, candidates),) = keep_last.calls
    assert query == VACATION_Q and len(candidates) >= len(plain.context)
    assert [c.source_id for c in reranked.context] == candidates[-1:]
    assert [c.source_id for c in broken.context] == [c.source_id for c in plain.context]
    assert "cross-encoder failed to load" in caplog.text


async def test_logs_carry_request_id(rag, fake_ollama):
    import io
    import json
    import logging

    from ragchat.services.logs import JsonFormatter

    cite(fake_ollama, 1)
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(JsonFormatter())
    service_logger = logging.getLogger("ragchat.services.rag_service")
    service_logger.addHandler(handler)
    old_level = service_logger.level
    service_logger.setLevel(logging.INFO)
    try:
        response = await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr"], request_id="req-123"))
    finally:
        service_logger.removeHandler(handler)
        service_logger.setLevel(old_level)
    assert response.request_id == "req-123"
    lines = [json.loads(line) for line in buffer.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["rag_search", "rag_budget", "rag_generate", "rag_done"]
    assert {line["request_id"] for line in lines} == {"req-123"}
    assert lines[0]["query_strategy"] == STRATEGY_FIRST
    assert set(lines[-1]["timings"]) == {"embed", "search", "generate", "rate"}


async def test_abandoned_stream_is_closed_cleanly(rag, fake_ollama):
    fake_ollama.reply("one two three four five six seven eight nine ten")
    fake_ollama.token_delay(0.01)
    stream = rag.stream(RAGRequest(query=VACATION_Q, user_tags=["hr"]))
    async for event in stream:
        if isinstance(event, TokenEvent):
            break  # the reader went away mid-answer
    await stream.aclose()
    # the service is still usable afterwards
    cite(fake_ollama, 1)
    assert (await rag.generate(RAGRequest(query=VACATION_Q, user_tags=["hr"]))).grounded


async def test_service_stage_methods(rag, owners):
    owners[("hr", "default")] = TagOwner(user_id="7", email="hr@company.com")
    assert await rag.validate_model("llama3.2") == "llama3.2"
    chunks = await rag.get_quality_context(VACATION_Q, ["hr"], "default", max_chunks=2)
    assert len(chunks) == 2 and chunks[0].document_id == VACATION
    assert all(c.score >= rag.min_similarity_score for c in chunks)
    target = await rag.get_route_target(chunks, confidence=41)
    assert (target.tag, target.owner_email, target.reason) == (
        "hr",
        "hr@company.com",
        "Low confidence: 41% - routing to hr owner",
    )
