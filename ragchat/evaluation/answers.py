"""`manage.py evaluate --answers`: the answers themselves, end to end, on a labelled set.

The demo documents (documents/demo_corpus.py, tenant "demo") and the evaluation corpus
(ragchat/evaluation/corpus.py, tenant "eval") go through the product's ingestion into a scratch
embedded store; each labelled question (answer_set.jsonl) is then asked through the product's
`RAGService`, built from the app's settings (its model server, model, thresholds), as an asker who
holds the question's tags ("public" always readable, as in the chat). Per answer:

- fact: one of the expected phrases is in the answer (case, thousands separators and spacing ignored);
- cited: at least one citation that points at a passage of the prompt (a valid citation);
- uncited supported sentences: sentences the grounding check finds supported by a passage of the
  prompt while citing none;
- false "I don't know": an answerable question answered with "not enough information";
- routed: the answer's action is ROUTE (share of answerable and of unanswerable questions);
- hallucinated, not routed: a statement that is not an "I don't know", to an unanswerable question
  or without the expected fact, that the pipeline did not route;
- seconds per answer (wall time of the whole pipeline, rating call included).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ragchat.evaluation import metrics
from ragchat.services.config import RAGSettings
from ragchat.services.declines import says_dont_know

ANSWER_SET = Path(__file__).with_name("answer_set.jsonl")
CORPORA = ("demo", "eval")


@dataclass(frozen=True)
class LabelledQuestion:
    id: str
    corpus: str  # "demo" or "eval": which documents (and tenant) it is asked over
    question: str
    tags: tuple[str, ...]  # the asker's tags ("public" is added, as for every signed-in person)
    answerable: bool
    facts: tuple[str, ...] = ()  # any one of these in the answer is the expected fact
    single_passage: bool = True  # the answer is stated in one passage
    why: str = ""  # why an unanswerable question is one


def load_answer_set(path: str | Path = ANSWER_SET) -> list[LabelledQuestion]:
    out = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            question = LabelledQuestion(
                id=str(data["id"]),
                corpus=str(data["corpus"]),
                question=str(data["question"]),
                tags=tuple(str(t) for t in data["tags"]),
                answerable=bool(data["answerable"]),
                facts=tuple(str(f) for f in data.get("facts") or ()),
                single_passage=bool(data.get("single_passage", True)),
                why=str(data.get("why") or ""),
            )
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}:{number}: not a labelled question ({e})") from e
        if question.corpus not in CORPORA:
            raise ValueError(f"{path}:{number}: corpus {question.corpus!r} is not one of {CORPORA}")
        if question.answerable and not question.facts:
            raise ValueError(f"{path}:{number}: an answerable question needs its expected facts")
        out.append(question)
    return out


def spread(questions: Sequence[LabelledQuestion], n: int) -> list[LabelledQuestion]:
    """`n` questions taken at even steps through the set: both corpora, answerable and unanswerable
    in about the set's proportions."""
    if n <= 0 or n >= len(questions):
        return list(questions)
    return [questions[i * len(questions) // n] for i in range(n)]


def _normalise(text: str) -> str:
    text = re.sub(r"(?<=\d)[,\u202f\u00a0](?=\d{3}\b)", "", text.lower())
    return re.sub(r"\s+", " ", text.replace("\u2019", "'"))


def has_fact(answer: str, facts: Sequence[str]) -> bool:
    """One of `facts` stands in `answer` as words of their own ("3" is not found in "13")."""
    plain = _normalise(answer)
    return any(re.search(rf"(?<!\w){re.escape(_normalise(f))}(?!\w)", plain) for f in facts)


def score_answer(question: LabelledQuestion, response: Any, seconds: float) -> dict[str, Any]:
    """One answer's row of the report, from the pipeline's RAGResponse."""
    retrieved = {c.source_id for c in response.context}
    valid = [c.source_id for c in response.citations if c.source_id in retrieved]
    sentences = list(response.grounding.sentences) if response.grounding is not None else []
    uncited = [s.text for s in sentences if s.status == "uncited"]
    dont_know = says_dont_know(response.answer)
    fact = has_fact(response.answer, question.facts) if question.answerable else False
    hallucinated = not dont_know and (not question.answerable or not fact)
    return {
        "id": question.id,
        "question": question.question,
        "tags": list(question.tags),
        "answerable": question.answerable,
        "single_passage": question.single_passage,
        "answer": response.answer,
        "fact": fact,
        "citations": len(response.citations),
        "valid_citations": len(valid),
        "attributed": sum(1 for c in response.citations if getattr(c, "attributed", False)),
        "supported_sentences": sum(1 for s in sentences if s.status in ("supported", "uncited")),
        "uncited_supported": len(uncited),
        "uncited_sentences": uncited,
        "unsupported_sentences": [s.text for s in sentences if s.status == "unsupported"],
        "dont_know": dont_know,
        "action": response.action,
        "confidence": response.confidence.overall,
        "context_chunks": response.context_chunks_used,
        "hallucinated": hallucinated,
        "seconds": round(seconds, 2),
    }


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    answerable = [r for r in rows if r["answerable"]]
    unanswerable = [r for r in rows if not r["answerable"]]
    single = [r for r in answerable if r["single_passage"]]

    def share(group: Sequence[dict[str, Any]], test: Callable[[dict[str, Any]], bool]) -> float:
        return sum(1 for r in group if test(r)) / len(group) if group else 0.0

    seconds = sorted(r["seconds"] for r in rows)
    return {
        "questions": len(rows),
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "fact_in_answer": share(answerable, lambda r: r["fact"]),
        "answerable_cited": share(answerable, lambda r: r["valid_citations"] > 0),
        "answerable_cited_excluding_dont_know": share(
            [r for r in answerable if not r["dont_know"]], lambda r: r["valid_citations"] > 0
        ),
        "uncited_supported_sentences": sum(r["uncited_supported"] for r in rows),
        "supported_sentences": sum(r["supported_sentences"] for r in rows),
        "false_dont_know": sum(1 for r in answerable if r["dont_know"]),
        "false_dont_know_single_passage": sum(1 for r in single if r["dont_know"]),
        "answerable_routed": share(answerable, lambda r: r["action"] == "ROUTE"),
        "unanswerable_routed": share(unanswerable, lambda r: r["action"] == "ROUTE"),
        "hallucinated_not_routed": sum(1 for r in rows if r["hallucinated"] and r["action"] != "ROUTE"),
        "seconds_per_answer": metrics.mean(seconds),
        "seconds_median": seconds[len(seconds) // 2] if seconds else 0.0,
        "seconds_max": seconds[-1] if seconds else 0.0,
        "failing": {
            "no_valid_citation": [r["id"] for r in answerable if r["valid_citations"] == 0],
            "uncited_supported": [r["id"] for r in rows if r["uncited_supported"]],
            "false_dont_know": [r["id"] for r in answerable if r["dont_know"]],
            "fact_missing": [r["id"] for r in answerable if not r["fact"]],
            "answerable_routed": [r["id"] for r in answerable if r["action"] == "ROUTE"],
            "unanswerable_not_routed": [r["id"] for r in unanswerable if r["action"] != "ROUTE"],
            "hallucinated_not_routed": [r["id"] for r in rows if r["hallucinated"] and r["action"] != "ROUTE"],
        },
    }


# ------------------------------------------------------------------------------------ the run


async def _ingest_demo(service: Any, settings: RAGSettings) -> int:
    from documents.demo_corpus import demo_files
    from ragchat.services.ingestion import ingest_document

    chunks = 0
    for demo in demo_files():
        result = await ingest_document(
            data=demo.data,
            filename=demo.filename,
            document_id=str(uuid.uuid4()),
            tenant_id="demo",
            tags=demo.tags,
            fallback_name=demo.filename,
            metadata={"path": demo.filename},
            store=service,
            embedder=service.embedder,
            settings=settings,
        )
        chunks += result.chunk_count
    return chunks


async def run_answer_evaluation(
    *,
    questions: Sequence[LabelledQuestion],
    base_settings: RAGSettings,
    llm: Any = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Ingest both corpora into a scratch store, ask every question through RAGService with
    `base_settings` (the app's), score each answer. `llm`: the client to use instead of the one
    the settings name (the fake model of the tests)."""
    from ragchat.evaluation.corpus import write_corpus
    from ragchat.evaluation.runner import ingest_folder
    from ragchat.services.embeddings import build_embedder
    from ragchat.services.errors import RAGServiceError
    from ragchat.services.rag_service import RAGService
    from ragchat.services.types import RAGRequest
    from ragchat.services.vector_store import VectorService

    say = progress or (lambda message: None)
    scratch = Path(tempfile.mkdtemp(prefix="ragchat-answers-"))
    settings = replace(
        base_settings,
        qdrant_url="",  # never a server: the scratch store is embedded, in a temp dir
        qdrant_path=str(scratch / "qdrant"),
        qdrant_collection=f"answers_{uuid.uuid4().hex[:8]}",
    )
    service = VectorService(settings, build_embedder(settings))
    try:
        await service.initialize()
        began = time.perf_counter()
        chunks = await _ingest_demo(service, settings)
        folder, _ = write_corpus(scratch / "eval-corpus")
        index = await ingest_folder(service, folder=folder, settings=settings, intruder_twins=False, tenant_id="eval")
        say(
            f"ingested the demo and evaluation documents ({chunks + index.chunks} chunks) in {time.perf_counter() - began:.1f} s"
        )
        rag = RAGService(service, settings, llm=llm)
        rows: list[dict[str, Any]] = []
        failed: list[dict[str, str]] = []
        for number, question in enumerate(questions, start=1):
            started = time.perf_counter()
            try:
                response = await rag.generate(
                    RAGRequest(query=question.question, user_tags=list(question.tags), tenant_id=question.corpus)
                )
            except RAGServiceError as e:  # reported with the question, the run goes on
                failed.append({"id": question.id, "error": f"{type(e).__name__}: {e}"})
                say(f"[{number}/{len(questions)}] {question.id} failed: {e}")
                continue
            row = score_answer(question, response, time.perf_counter() - started)
            rows.append(row)
            say(
                f"[{number}/{len(questions)}] {question.id} {row['seconds']:.1f} s {row['action']} "
                f"cited={row['valid_citations']} fact={row['fact']} idk={row['dont_know']}"
            )
        summary = summarise(rows)
        summary["failed"] = failed
        return {"model": settings.chat_model, "summary": summary, "per_question": rows}
    finally:
        await service.close()
        shutil.rmtree(scratch, ignore_errors=True)


def format_answer_report(report: dict[str, Any]) -> str:
    s = report["summary"]
    lines = [
        f"answers of {report['model']}: {s['answerable']} answerable, {s['unanswerable']} unanswerable questions",
        f"  expected fact in the answer          {s['fact_in_answer']:.0%} of answerable",
        f"  >=1 valid citation                   {s['answerable_cited']:.0%} of answerable "
        f"({s['answerable_cited_excluding_dont_know']:.0%} of those not declined)",
        f"  supported sentences without citation {s['uncited_supported_sentences']} of {s['supported_sentences']}",
        f'  false "I don\'t know"                 {s["false_dont_know"]} ({s["false_dont_know_single_passage"]} stated in one passage)',
        f"  routed                               {s['answerable_routed']:.0%} of answerable, "
        f"{s['unanswerable_routed']:.0%} of unanswerable",
        f"  hallucinated answers not routed      {s['hallucinated_not_routed']}",
        f"  seconds per answer                   {s['seconds_per_answer']:.1f} mean, "
        f"{s['seconds_median']:.1f} median, {s['seconds_max']:.1f} max",
    ]
    for label, ids in s["failing"].items():
        if ids:
            lines.append(f"  {label}: {', '.join(ids)}")
    for failure in s.get("failed") or ():
        lines.append(f"  not answered: {failure['id']} ({failure['error']})")
    return "\n".join(lines)
