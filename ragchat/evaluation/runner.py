"""`manage.py evaluate`, as plain async code: ingest a folder into a scratch collection, ask the gold
questions, measure.

- Scratch: an embedded Qdrant under a temporary directory with its own collection name; the live
  store (settings.qdrant_path / QDRANT_URL) is never opened.
- Ingestion is the product's own pipeline (ragchat/services/ingestion.py: parse -> chunk sized to
  the embedder -> embed in batches -> upsert). The top-level subfolder of a file is its tag; files
  at the root are "public". The same chunks (same vectors) are also stored under an
  intruder tenant: a tenant filter that failed would return them first.
- Per question and mode (hybrid, dense, bm25): the retrieval query (build_retrieval_query over the
  question's history, as the chat does), a search as the asker (their tags, default: every tag),
  ranking metrics on the documents of the top chunks, support in the top 5 chunks and in the
  quality context (what the prompt would get), access leakage as the asker and as a probe user who
  holds one unrelated tag only.
- Citation validity: the whole RAGService pipeline against the fake Ollama server (zero latency),
  whose model cites the first two SourceIds of its prompt and, every other question, a forged one
  (a real chunk the prompt did not contain), in turn canonically and in the citation styles small
  models use ("[1]", "[S1]", full-width brackets…). Validity = share of the citations the pipeline returns
  that point at a chunk it retrieved for that question (the forged ones must be dropped).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import shutil
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from ragchat.evaluation import metrics
from ragchat.services.config import RAGSettings
from ragchat.services.embeddings import build_embedder
from ragchat.services.glossary import GlossaryEntry, entries_from_csv, expand_query
from ragchat.services.ingestion import STAGES, IngestionResult, ingest_document
from ragchat.services.retrieval import build_retrieval_query, get_quality_context
from ragchat.services.types import ChatMessage, SearchResult
from ragchat.services.vector_store import PUBLIC_TAG, SEARCH_MODES, VectorService

logger = logging.getLogger(__name__)

TENANT = "default"
INTRUDER_TENANT = "eval-intruder"
RANK_DEPTH = 20  # chunks fetched per search; documents are ranked from them
EMBEDDERS = {"local": "all-MiniLM-L6-v2", "hashing": "hashing-384"}
SUPPORTED_SUFFIXES = {
    ".pdf",
    ".docx",
    ".pptx",
    ".xlsx",
    ".csv",
    ".odt",
    ".ods",
    ".odp",
    ".rtf",
    ".eml",
    ".html",
    ".htm",
    ".md",
    ".markdown",
    ".txt",
    ".text",
}


@dataclass(frozen=True)
class Question:
    question: str
    relevant_documents: tuple[str, ...]
    support_phrases: tuple[str, ...] = ()
    tags: tuple[str, ...] | None = None
    history: tuple[str, ...] = ()
    kind: str = "fact"
    standalone: str = ""


@dataclass
class CorpusIndex:
    documents: dict[str, str]  # path -> document_id
    tags: dict[str, str]  # path -> tag
    chunks: int
    glossary: list[GlossaryEntry] = field(default_factory=list)  # <folder>/glossary.csv, if any
    failed: dict[str, str] = field(default_factory=dict)  # path -> reason
    seconds: float = 0.0
    stage_seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))

    @property
    def path_of(self) -> dict[str, str]:
        return {doc_id: path for path, doc_id in self.documents.items()}

    @property
    def all_tags(self) -> list[str]:
        return sorted(set(self.tags.values()))


# ------------------------------------------------------------------------------------ inputs


def load_questions(path: str | Path) -> list[Question]:
    questions = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            questions.append(
                Question(
                    question=str(data["question"]),
                    relevant_documents=tuple(str(p) for p in data["relevant_documents"]),
                    support_phrases=tuple(str(p) for p in data.get("support_phrases") or ()),
                    tags=tuple(data["tags"]) if data.get("tags") is not None else None,
                    history=tuple(str(h) for h in data.get("history") or ()),
                    kind=str(data.get("kind") or ("follow-up" if data.get("history") else "fact")),
                    standalone=str(data.get("standalone") or ""),
                )
            )
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}:{number}: not a gold question ({e})") from e
    return questions


def corpus_files(folder: str | Path) -> list[tuple[str, str]]:
    """(relative path, tag) of every file we can read under `folder`; the first folder is the tag
    (the glossary.csv at the top is the glossary, not a document)."""
    root = Path(folder)
    out = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.suffix.lower() not in SUPPORTED_SUFFIXES:
            continue
        relative = path.relative_to(root).as_posix()
        if relative == GLOSSARY_FILE:  # the folder's glossary, not a document
            continue
        parts = PurePosixPath(relative).parts
        tag = parts[0].lower() if len(parts) > 1 else PUBLIC_TAG
        out.append((relative, tag))
    return out


# ------------------------------------------------------------------------------------ ingestion


async def ingest_folder(
    service: VectorService,
    *,
    folder: str | Path,
    settings: RAGSettings,
    intruder_twins: bool = True,
    concurrency: int = 2,
    tenant_id: str = TENANT,
) -> CorpusIndex:
    """Every file through the product's ingestion pipeline, `concurrency` at once as the server
    ingests them (RAGCHAT_INGEST_CONCURRENCY, 2 by default: one file is parsed while another is
    embedded), and, unless told not to, its intruder-tenant twin: the same chunks and vectors under
    another tenant and document id."""
    started = time.perf_counter()
    index = CorpusIndex(documents={}, tags={}, chunks=0)
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(relative: str, tag: str) -> tuple[str, IngestionResult]:
        async with gate:
            document_id = str(uuid.uuid4())
            try:
                result = await ingest_document(
                    data=(Path(folder) / relative).read_bytes(),
                    filename=PurePosixPath(relative).name,
                    document_id=document_id,
                    tenant_id=tenant_id,
                    tags=(tag,),
                    fallback_name=relative,
                    metadata={"path": relative},
                    store=service,
                    embedder=service.embedder,
                    settings=settings,
                    keep_vectors=intruder_twins,
                )
            except Exception:  # a file the product would fail: reported, not fatal, nothing left behind
                await service.delete_document(document_id, tenant_id=tenant_id)
                raise
            if intruder_twins:
                twin_id = str(uuid.uuid4())
                twins = [replace(r, document_id=twin_id, tenant_id=INTRUDER_TENANT) for r in result.records]
                await service.upsert_chunks(twins, result.vectors)
            return document_id, result

    files = list(corpus_files(folder))
    outcomes = await asyncio.gather(*(one(relative, tag) for relative, tag in files), return_exceptions=True)
    for (relative, tag), outcome in zip(files, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            if not isinstance(outcome, Exception):
                raise outcome
            index.failed[relative] = f"{type(outcome).__name__}: {outcome}"
            continue
        document_id, result = outcome
        for stage, seconds in result.timings.as_dict().items():
            index.stage_seconds[stage] += seconds
        index.documents[relative] = document_id
        index.tags[relative] = tag
        index.chunks += result.chunk_count
    index.seconds = time.perf_counter() - started
    return index


# ------------------------------------------------------------------------------------ retrieval


class ModeSearch:
    """The vector service with a fixed search mode, for callers (the quality context, RAGService)
    that call search() without one."""

    def __init__(self, service: VectorService, mode: str) -> None:
        self.service = service
        self.mode = mode

    async def search(self, query: str, **kwargs: Any) -> list[SearchResult]:
        return await self.service.search(query, mode=self.mode, **kwargs)

    async def stats(self) -> dict[str, Any]:
        return await self.service.stats()


def retrieval_query(question: Question) -> str:
    return retrieval_query_and_strategy(question)[0]


def retrieval_query_and_strategy(question: Question) -> tuple[str, str]:
    history = [ChatMessage(role="user", content=h) for h in question.history]
    return build_retrieval_query(query=question.question, history=history)


GLOSSARY_FILE = "glossary.csv"


def load_glossary(folder: str | Path) -> list[GlossaryEntry]:
    """The folder's glossary.csv (the admin's CSV format), or none."""
    path = Path(folder) / GLOSSARY_FILE
    return entries_from_csv(path.read_text(encoding="utf-8")) if path.exists() else []


def glossary_for(entries: Sequence[GlossaryEntry], tags: Sequence[str]) -> tuple[GlossaryEntry, ...]:
    """The entries of the tags the asker holds (and public ones), as the chat gives them."""
    allowed = {*tags, PUBLIC_TAG}
    return tuple(e for e in entries if e.tag in allowed)


def leaked(results: Sequence[SearchResult], user_tags: Sequence[str]) -> int:
    """Chunks a user holding `user_tags` must not see: another tenant, or no tag in common."""
    allowed = {*user_tags, PUBLIC_TAG}
    return sum(1 for r in results if r.tenant_id != TENANT or not set(r.tags) & allowed)


def probe_tag(relevant_tags: set[str], all_tags: Sequence[str]) -> str | None:
    """One tag unrelated to the question: not the relevant documents' and not public."""
    for tag in all_tags:
        if tag != PUBLIC_TAG and tag not in relevant_tags:
            return tag
    return None


async def _score_question(
    service: VectorService,
    question: Question,
    *,
    mode: str,
    index: CorpusIndex,
    settings: RAGSettings,
) -> dict[str, Any]:
    asker_tags = list(question.tags) if question.tags is not None else index.all_tags
    unexpanded, strategy = retrieval_query_and_strategy(question)
    query, glossary_terms = expand_query(unexpanded, glossary_for(index.glossary, asker_tags))
    timings: dict[str, float] = {}
    results = await service.search(
        query, user_tags=asker_tags, tenant_id=TENANT, limit=RANK_DEPTH, mode=mode, timings=timings
    )
    path_of = index.path_of
    ranked = metrics.ranked_documents(path_of.get(r.document_id, "?") for r in results)
    relevant = set(question.relevant_documents)
    context = await get_quality_context(
        ModeSearch(service, mode),
        query=query,
        user_tags=asker_tags,
        tenant_id=TENANT,
        settings=settings,
        max_chunks=5,
    )
    top5 = [r.chunk_text for r in results[:5]]
    if question.support_phrases:
        support5 = metrics.has_support(top5, question.support_phrases)
        support_context = metrics.has_support([c.chunk_text for c in context], question.support_phrases)
    else:  # no phrase given: a chunk of a relevant document counts as support
        support5 = any(path_of.get(r.document_id) in relevant for r in results[:5])
        support_context = any(path_of.get(c.document_id) in relevant for c in context)
    conversation: dict[str, Any] = {}
    if glossary_terms:
        # The same search without the glossary: what the expansion changed.
        alt = await service.search(unexpanded, user_tags=asker_tags, tenant_id=TENANT, limit=RANK_DEPTH, mode=mode)
        alt_ranked = metrics.ranked_documents(path_of.get(r.document_id, "?") for r in alt)
        conversation["recall@5_no_glossary"] = metrics.recall_at(alt_ranked, relevant, 5)
        conversation["mrr_no_glossary"] = metrics.reciprocal_rank(alt_ranked, relevant)
        conversation["support@5_no_glossary"] = (
            metrics.has_support([r.chunk_text for r in alt[:5]], question.support_phrases)
            if question.support_phrases
            else any(path_of.get(r.document_id) in relevant for r in alt[:5])
        )
    if question.history:
        # The same question searched as asked alone, and as a person would rewrite it to stand alone.
        for label, text in (("raw", question.question), ("standalone", question.standalone)):
            if not text:
                continue
            alt = await service.search(text, user_tags=asker_tags, tenant_id=TENANT, limit=RANK_DEPTH, mode=mode)
            alt_ranked = metrics.ranked_documents(path_of.get(r.document_id, "?") for r in alt)
            conversation[f"recall@5_{label}"] = metrics.recall_at(alt_ranked, relevant, 5)
            if question.support_phrases:
                conversation[f"support@5_{label}"] = metrics.has_support(
                    [r.chunk_text for r in alt[:5]], question.support_phrases
                )
    relevant_tags = {index.tags.get(p, "") for p in relevant}
    probe = probe_tag(relevant_tags, index.all_tags)
    probe_leaks = 0
    if probe is not None:
        probe_results = await service.search(query, user_tags=[probe], tenant_id=TENANT, limit=RANK_DEPTH, mode=mode)
        probe_leaks = leaked(probe_results, [probe])
    return {
        "question": question.question,
        "kind": question.kind,
        "retrieval_query": query,
        "strategy": strategy,
        "glossary_terms": glossary_terms,
        "history": list(question.history),
        **conversation,
        "relevant": sorted(relevant),
        "ranked": ranked[:10],
        "recall@1": metrics.recall_at(ranked, relevant, 1),
        "recall@5": metrics.recall_at(ranked, relevant, 5),
        "mrr": metrics.reciprocal_rank(ranked, relevant),
        "ndcg@10": metrics.ndcg_at(ranked, relevant, 10),
        "support@5": support5,
        "context_support": support_context,
        # No chunk reached the prompt: the chat would answer "I don't have enough information".
        "context_chunks": len(context),
        "leaked_asker": leaked(results, asker_tags) + leaked(context, asker_tags),
        "probe_tag": probe,
        "leaked_probe": probe_leaks,
        "search_ms": timings.get("search", 0.0) + timings.get("embed", 0.0),
    }


def _aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def share(key: str) -> float:
        return metrics.mean([1.0 if r[key] else 0.0 for r in rows])

    out: dict[str, Any] = {
        "questions": len(rows),
        "recall@1": metrics.mean([r["recall@1"] for r in rows]),
        "recall@5": metrics.mean([r["recall@5"] for r in rows]),
        "mrr": metrics.mean([r["mrr"] for r in rows]),
        "ndcg@10": metrics.mean([r["ndcg@10"] for r in rows]),
        "support@5": share("support@5"),
        "context_support@5": share("context_support"),
        # Every gold question is answerable: each of these is a false "I don't know".
        "zero_context": sum(1 for r in rows if not r["context_chunks"]),
        "leakage": sum(r["leaked_asker"] + r["leaked_probe"] for r in rows),
    }
    kinds = sorted({r["kind"] for r in rows})
    out["recall@5_by_kind"] = {k: metrics.mean([r["recall@5"] for r in rows if r["kind"] == k]) for k in kinds}
    out["by_format"] = format_summary(rows)
    out["conversation"] = conversation_summary(rows)
    out["glossary"] = glossary_summary(rows)
    return out


def document_format(path: str) -> str:
    """A corpus file's format, named by its extension ("pptx", "xlsx", "md")."""
    suffix = PurePosixPath(path).suffix.lower().lstrip(".")
    return {"htm": "html", "markdown": "md", "text": "txt"}.get(suffix, suffix or "?")


def format_summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Recall@5 and support@5 per format of the questions' relevant documents (a question about
    documents of two formats counts for both); table questions (kind "table") also on their own."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        for name in sorted({document_format(path) for path in row["relevant"]}):
            groups.setdefault(name, []).append(row)
        if row["kind"] == "table":
            groups.setdefault("table rows", []).append(row)
    return {
        name: {
            "questions": len(group),
            "recall@5": metrics.mean([r["recall@5"] for r in group]),
            "support@5": metrics.mean([1.0 if r["support@5"] else 0.0 for r in group]),
        }
        for name, group in sorted(groups.items())
    }


def glossary_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Questions whose search the glossary expanded: recall@5, MRR and support@5 with and without it."""
    expanded = [r for r in rows if r.get("glossary_terms")]
    if not expanded:
        return {"questions_expanded": 0}
    return {
        "questions_expanded": len(expanded),
        "recall@5": metrics.mean([r["recall@5"] for r in expanded]),
        "recall@5_without": metrics.mean([r["recall@5_no_glossary"] for r in expanded]),
        "mrr": metrics.mean([r["mrr"] for r in expanded]),
        "mrr_without": metrics.mean([r["mrr_no_glossary"] for r in expanded]),
        "support@5": metrics.mean([1.0 if r["support@5"] else 0.0 for r in expanded]),
        "support@5_without": metrics.mean([1.0 if r["support@5_no_glossary"] else 0.0 for r in expanded]),
    }


def conversation_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Questions asked after earlier turns, by kind (follow-up, topic-switch): recall@5 and
    support@5 of the chat's strategy next to the same question searched alone (raw) and as a person's
    standalone rewrite; `as_follow_up` is the share the strategy treated as a follow-up."""
    out: dict[str, Any] = {}
    for kind in sorted({r["kind"] for r in rows if r.get("history")}):
        group = [r for r in rows if r.get("history") and r["kind"] == kind]
        summary: dict[str, Any] = {"questions": len(group)}
        for label, key in (("strategy", ""), ("raw", "_raw"), ("standalone", "_standalone")):
            recalls = [r[f"recall@5{key}"] for r in group if f"recall@5{key}" in r]
            supports = [1.0 if r[f"support@5{key}"] else 0.0 for r in group if f"support@5{key}" in r]
            if key == "":
                recalls = [r["recall@5"] for r in group]
                supports = [1.0 if r["support@5"] else 0.0 for r in group]
            if recalls:
                summary[f"recall@5_{label}"] = metrics.mean(recalls)
            if supports:
                summary[f"support@5_{label}"] = metrics.mean(supports)
        summary["as_follow_up"] = metrics.mean([1.0 if r["strategy"].startswith("follow-up") else 0.0 for r in group])
        out[kind] = summary
    return out


# ------------------------------------------------------------------------------------ citations


def _forging_reply(forged_ids: list[str], stats: dict[str, int]):
    """The fake model's answer: cite the first two SourceIds of the prompt; on every other call,
    also cite a real chunk the prompt did not contain (a hallucinated citation, counted in
    stats["forged_written"])."""
    import re

    from ragchat.services.prompts import RAG_SYSTEM_PROMPT

    source_re = re.compile(r"\[SourceId:\s*([a-f0-9-]{36}:\d+)\]")
    template_ids = set(source_re.findall(RAG_SYSTEM_PROMPT))  # the prompt's format example
    calls = {"n": 0}
    rng = random.Random(6)

    def reply(messages: list[dict[str, Any]]) -> str:
        system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
        in_prompt = [sid for sid in dict.fromkeys(source_re.findall(system)) if sid not in template_ids]
        calls["n"] += 1
        parts = [f"According to the policy [SourceId: {sid}]." for sid in in_prompt[:2]]
        if calls["n"] % 2 == 0:
            candidates = [sid for sid in forged_ids if sid not in in_prompt]
            if candidates:
                parts.append(f"Also see [SourceId: {rng.choice(candidates)}].")
                stats["forged_written"] += 1
        return " ".join(parts) or "I don't have enough information in the available documents."

    return reply


async def citation_validity(
    service: VectorService,
    questions: Sequence[Question],
    *,
    mode: str,
    index: CorpusIndex,
    settings: RAGSettings,
    ollama_url: str,
    fake: Any,
) -> dict[str, Any]:
    from ragchat.fake_ollama.server import CITATION_STYLES
    from ragchat.services.llm import OllamaLLM
    from ragchat.services.rag_service import RAGService
    from ragchat.services.types import RAGRequest

    forged_pool = [f"{doc_id}:0" for doc_id in index.documents.values()]
    stats = {"forged_written": 0}
    fake.reply_with(_forging_reply(forged_pool, stats))
    # Question by question, the model writes its citations canonically or in one of the styles
    # small models use ("[1]", "[S1]", full-width brackets…): the same two passages must come out.
    habits: list[str | None] = [None, *sorted(CITATION_STYLES)]
    styled = recovered = 0
    llm_settings = replace(settings, ollama_base_url=ollama_url)
    rag = RAGService(ModeSearch(service, mode), llm_settings, llm=OllamaLLM(llm_settings, base_url=ollama_url))
    answers = cited = cited_retrieved = shown = shown_valid = leaks = 0
    for number, question in enumerate(questions):
        habit = habits[number % len(habits)]
        fake.habits(citations=habit)
        asker_tags = list(question.tags) if question.tags is not None else index.all_tags
        history = [ChatMessage(role="user", content=h) for h in question.history]
        response = await rag.generate(
            RAGRequest(
                query=question.question,
                user_tags=asker_tags,
                tenant_id=TENANT,
                chat_history=history,
                glossary=glossary_for(index.glossary, asker_tags),
            )
        )
        answers += 1
        retrieved = {c.source_id for c in response.context}
        in_answer = _cited(response.answer)
        cited += len(in_answer)
        cited_retrieved += sum(1 for sid in in_answer if sid in retrieved)
        shown += len(response.citations)
        shown_valid += sum(1 for c in response.citations if c.source_id in retrieved)
        leaks += leaked(response.context, asker_tags)
        expected = [c.source_id for c in response.context][:2]
        if habit is not None and expected:
            styled += 1
            recovered += [c.source_id for c in response.citations] == expected
    fake.habits()
    return {
        "answers": answers,
        "cited_in_answers": cited,
        "cited_and_retrieved": cited_retrieved,
        "forged_written": stats["forged_written"],
        "forged_in_answers": cited - cited_retrieved,
        "styled_answers": styled,
        "styled_recovered": recovered,
        "citations_returned": shown,
        "citations_valid": shown_valid,
        "citation_validity": shown_valid / shown if shown else 0.0,
        "leakage": leaks,
    }


def _cited(answer: str) -> list[str]:
    from ragchat.services.citations import cited_source_ids

    return cited_source_ids(answer)


# ------------------------------------------------------------------------------------ entry point


async def run_evaluation(
    *,
    folder: str | Path,
    questions: Sequence[Question],
    base_settings: RAGSettings,
    embedder: str = "local",
    modes: Sequence[str] = SEARCH_MODES,
    citations: bool = True,
    progress: Any = None,
) -> dict[str, Any]:
    """Evaluate retrieval on `folder` for `questions`; returns the report (JSON-ready)."""
    scratch = Path(tempfile.mkdtemp(prefix="ragchat-eval-"))
    settings = replace(
        base_settings,
        qdrant_url="",  # never a server: the scratch store is embedded, in a temp dir
        qdrant_path=str(scratch / "qdrant"),
        qdrant_collection=f"eval_{uuid.uuid4().hex[:8]}",
        embedding_backend=embedder,
        embedding_model=EMBEDDERS[embedder],
    )
    say = progress or (lambda message: None)
    service = VectorService(settings, build_embedder(settings))
    fake = None
    try:
        await service.initialize()
        say(f"ingesting {folder} into scratch collection {settings.qdrant_collection} ({embedder} embedder)")
        index = await ingest_folder(service, folder=folder, settings=settings)
        index.glossary = load_glossary(folder)
        say(f"ingested {len(index.documents)} documents, {index.chunks} chunks in {index.seconds:.1f} s")
        missing = sorted({p for q in questions for p in q.relevant_documents} - set(index.documents))
        report: dict[str, Any] = {
            "folder": str(folder),
            "embedder": EMBEDDERS[embedder],
            "documents": len(index.documents),
            "tags": index.all_tags,
            "chunks": index.chunks,
            "ingest_seconds": round(index.seconds, 2),
            "failed_documents": index.failed,
            "questions": len(questions),
            "missing_relevant_documents": missing,
            "modes": {},
            "per_question": {},
            "grounding": grounding_figures(),
        }
        for mode in modes:
            rows = [await _score_question(service, q, mode=mode, index=index, settings=settings) for q in questions]
            summary = _aggregate(rows)
            summary["search_ms_mean"] = metrics.mean([r["search_ms"] for r in rows])
            report["modes"][mode] = summary
            report["per_question"][mode] = rows
            say(f"{mode}: recall@5 {summary['recall@5']:.3f}, support@5 {summary['support@5']:.3f}")
        if citations:
            from ragchat.fake_ollama import FakeOllama

            fake = FakeOllama().start()
            fake.token_delay(0.0)
            for mode in modes:
                result = await citation_validity(
                    service, questions, mode=mode, index=index, settings=settings, ollama_url=fake.url, fake=fake
                )
                report["modes"][mode]["citations"] = result
                report["modes"][mode]["citation_validity"] = result["citation_validity"]
                report["modes"][mode]["leakage"] += result["leakage"]
        return report
    finally:
        if fake is not None:
            fake.stop()
        await service.close()
        shutil.rmtree(scratch, ignore_errors=True)


def grounding_figures() -> dict[str, Any]:
    """The per-sentence grounding check on its labelled set (ragchat/evaluation/grounding_set.py)."""
    from ragchat.evaluation.grounding_set import score_grounding

    result = score_grounding()
    return {k: v for k, v in result.items() if k != "rows"}


SUMMARY_COLUMNS = (
    ("recall@1", "R@1"),
    ("recall@5", "R@5"),
    ("mrr", "MRR"),
    ("ndcg@10", "nDCG@10"),
    ("support@5", "support@5"),
    ("context_support@5", "ctx-support"),
    ("citation_validity", "cite-valid"),
    ("leakage", "leakage"),
    ("zero_context", "no-context"),
)


def format_table(report: dict[str, Any]) -> str:
    header = ["mode"] + [label for _, label in SUMMARY_COLUMNS]
    lines = [
        f"{report['documents']} documents ({', '.join(report['tags'])}), {report['chunks']} chunks, "
        f"{report['questions']} questions, embedder {report['embedder']}",
        "  ".join(f"{h:>11}" for h in header),
    ]
    for mode, summary in report["modes"].items():
        cells = [mode]
        for key, _ in SUMMARY_COLUMNS:
            value = summary.get(key)
            if value is None:
                cells.append("-")
            elif key in ("leakage", "zero_context"):
                cells.append(str(value))
            else:
                cells.append(f"{value:.3f}")
        lines.append("  ".join(f"{c:>11}" for c in cells))
    kinds = next(iter(report["modes"].values()), {}).get("recall@5_by_kind", {})
    if kinds:
        lines.append(
            "recall@5 by question kind: "
            + "; ".join(
                f"{mode}: " + ", ".join(f"{k} {v:.2f}" for k, v in s["recall@5_by_kind"].items())
                for mode, s in report["modes"].items()
            )
        )
    for mode, summary in report["modes"].items():
        if summary.get("by_format"):
            lines.append(
                f"{mode} by format (questions, recall@5, support@5): "
                + "; ".join(
                    f"{name} {f['questions']} {f['recall@5']:.2f} {f['support@5']:.2f}"
                    for name, f in summary["by_format"].items()
                )
            )
    for mode, summary in report["modes"].items():
        for kind, c in summary.get("conversation", {}).items():
            lines.append(
                f"{mode} {kind} ({c['questions']} asked after earlier turns): "
                f"R@5 strategy {c['recall@5_strategy']:.2f}, raw {c.get('recall@5_raw', 0):.2f}, "
                f"standalone {c.get('recall@5_standalone', 0):.2f}; support@5 strategy "
                f"{c.get('support@5_strategy', 0):.2f}, raw {c.get('support@5_raw', 0):.2f}, standalone "
                f"{c.get('support@5_standalone', 0):.2f}; treated as follow-up {c['as_follow_up']:.0%}"
            )
    for mode, summary in report["modes"].items():
        g = summary.get("glossary") or {}
        if g.get("questions_expanded"):
            lines.append(
                f"{mode} glossary ({g['questions_expanded']} questions expanded): R@5 {g['recall@5']:.2f} "
                f"(without {g['recall@5_without']:.2f}), MRR {g['mrr']:.2f} (without {g['mrr_without']:.2f}), "
                f"support@5 {g['support@5']:.2f} (without {g['support@5_without']:.2f})"
            )
    for mode, summary in report["modes"].items():
        c = summary.get("citations") or {}
        if c.get("styled_answers"):
            lines.append(
                f"{mode} models' citation styles: {c['styled_recovered']}/{c['styled_answers']} answers written in "
                f"another style gave exactly the passages cited; {c['forged_written']} invented ids written, "
                f"{c['forged_in_answers']} left in answers"
            )
    grounding = report.get("grounding")
    if grounding:
        lines.append(
            f"grounding check (labelled set, {grounding['sentences']} sentences, {grounding['unsupported']} unsupported): "
            f"precision {grounding['precision']:.2f}, recall {grounding['recall']:.2f}, accuracy {grounding['accuracy']:.2f}"
            + (f"; missed: {grounding['missed_by_kind']}" if grounding["missed_by_kind"] else "")
        )
    if report["failed_documents"]:
        lines.append(f"not ingested: {report['failed_documents']}")
    if report["missing_relevant_documents"]:
        lines.append(f"relevant documents not in the folder: {report['missing_relevant_documents']}")
    return "\n".join(lines)
