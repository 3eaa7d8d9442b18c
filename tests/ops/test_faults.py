"""Fault tests (issue 6): each asserts that nothing is lost.

Already proven in tests/chat/test_consumer.py and not repeated here: Ollama refusing connections,
a timeout before the first token, a stall mid-stream, an error line mid-stream (question kept, partial
kept and marked interrupted, passages shown, retry works) and a tab closed mid-answer (the answer
completes and is stored). This file adds Ollama 500s, the vector store unavailable during a question
and during ingestion.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from asgiref.sync import async_to_sync, sync_to_async

from chat import turns
from chat.models import Message
from documents import services
from documents.models import Document
from ragchat import runtime
from ragchat.evaluation.docgen import lorem_sentences, make_text
from tests.chat.conftest import VACATION_DOC, open_tab
from tests.ops.conftest import dead_port

VACATION_Q = "How many vacation days do employees get per year?"


@sync_to_async
def rows(session) -> list[Message]:
    return list(Message.objects.filter(session=session).order_by("id"))


async def ask(tab, question: str) -> str:
    await tab.ask(question)
    final = await tab.until_final()
    await turns.wait_idle()
    return final


# ------------------------------------------------------------------------------------ Ollama 500s


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("drain_turns")
async def test_ollama_500s_fail_the_turn_and_keep_question_and_passages(chat_session, corpus, fake_ollama):
    fake_ollama.reply("Employees get 25 vacation days.")
    fake_ollama.fail_with(500, times=None, paths=("/api/chat",))
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    final = await ask(tab, VACATION_Q)
    question, answer = await rows(chat_session)
    assert question.content == VACATION_Q
    assert answer.status == Message.Status.FAILED and answer.error == turns.MSG_UNAVAILABLE
    assert answer.error_type == "LLMResponseError"
    assert answer.passages and answer.passages[0]["document_id"] == VACATION_DOC
    assert turns.MSG_UNAVAILABLE in final and "Passages found" in final
    # Transient 500s were retried before giving up (RAG_RETRY_ATTEMPTS).
    assert len(fake_ollama.requests_to("/api/chat")) > 1
    # Ollama recovers: the retry button answers the same question, and the answer replaces the
    # failed one (the question and the new answer stay).
    fake_ollama.reset()
    fake_ollama.reply_citing(1)
    await tab.send({"retry": str(answer.pk)})
    await tab.until_final()
    await turns.wait_idle()
    question, retried = await rows(chat_session)
    assert retried.status == "complete" and retried.reply_to_id == question.pk and retried.pk != answer.pk
    await tab.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("drain_turns")
async def test_one_ollama_500_is_retried_transparently(chat_session, corpus, fake_ollama):
    fake_ollama.reply_citing(1)
    fake_ollama.fail_with(500, times=1, paths=("/api/chat",))
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    await ask(tab, VACATION_Q)
    _, answer = await rows(chat_session)
    assert answer.status == "complete" and answer.citations, answer.error
    await tab.close()


# ------------------------------------------------------------------------------ vector store, chat


@pytest.mark.filterwarnings("ignore:Failed to obtain server version")  # qdrant-client, dead server
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("drain_turns")
async def test_vector_server_unreachable_during_a_question(chat_session, rag_runtime, settings, fake_ollama):
    settings.RAG = replace(rag_runtime, qdrant_url=f"http://127.0.0.1:{dead_port()}", rag_retry_attempts=1)
    runtime.reset()
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    final = await ask(tab, VACATION_Q)
    question, answer = await rows(chat_session)
    assert question.content == VACATION_Q
    assert answer.status == "failed" and answer.error == turns.MSG_SEARCH, answer.error
    assert turns.MSG_SEARCH in final and f'name="retry" value="{answer.pk}"' in final
    assert fake_ollama.requests_to("/api/chat") == []  # no answer was made up without documents
    # No crash: the same socket still takes questions.
    await tab.ask("And what about expense reports?")
    await tab.until_final()
    await turns.wait_idle()
    assert [m.role for m in await rows(chat_session)] == ["user", "assistant", "user", "assistant"]
    await tab.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("drain_turns")
async def test_embedded_store_closed_during_a_question_then_back(chat_session, corpus, fake_ollama):
    runtime.vector_service().backend.release_sync()  # the shard goes away under the running service
    tab = await open_tab(chat_session.owner, chat_session.pk)
    assert await tab.connect()
    await ask(tab, VACATION_Q)
    question, answer = await rows(chat_session)
    assert answer.status == "failed" and answer.error == turns.MSG_SEARCH
    # The store comes back (the process reopens it): retrying answers from the same, intact index.
    runtime.reset()
    fake_ollama.reply_citing(1)
    await tab.send({"retry": str(answer.pk)})
    await tab.until_final()
    await turns.wait_idle()
    retried = (await rows(chat_session))[-1]
    assert retried.status == "complete" and retried.citations[0]["document_id"] == VACATION_DOC
    await tab.close()


# ------------------------------------------------------------------------- vector store, ingestion


def _count(**kwargs) -> int:
    async def run():
        return await (await runtime.ready_vector_service()).count(**kwargs)

    return async_to_sync(run)()


@pytest.mark.filterwarnings("ignore:Failed to obtain server version")  # qdrant-client, dead server
@pytest.mark.django_db
def test_vector_server_unreachable_during_ingestion(people, tags, rag_runtime, settings):
    settings.RAG = replace(rag_runtime, qdrant_url=f"http://127.0.0.1:{dead_port()}", rag_retry_attempts=1)
    runtime.reset()
    document = services.document_create(
        user=people["owner"], data=make_text(lorem_sentences(30, seed=3)), filename="plan.txt", tags=[tags["finance"]]
    )
    result = services.document_ingest_sync(document.id)
    document.refresh_from_db()
    assert result.status == document.status == Document.Status.FAILED
    assert document.error.startswith("The search index could not store the document; try again later.")
    assert document.chunk_count == 0 and document.file.name  # the original is kept for the retry
    # The store is back (embedded here): the retry indexes it fully.
    settings.RAG = rag_runtime
    runtime.reset()
    services.document_requeue(document=document)
    services.document_ingest_sync(document.id)
    document.refresh_from_db()
    assert document.status == "ready" and document.error == ""
    assert _count(document_id=str(document.id)) == document.chunk_count > 0


@pytest.mark.django_db
def test_vector_store_lost_mid_ingestion_leaves_no_orphans_once_back(people, tags, rag_runtime, settings):
    """Two batches are in the index when the store goes away: the upsert and the cleanup both fail.
    The document ends failed and retryable; when the store is back, its partial vectors are purged
    (documents.services.documents_purge_failed_vectors runs before the next ingestion), and a retry
    indexes it whole."""
    settings.RAG = replace(rag_runtime, embedding_batch_size=3, chunk_size_tokens=64, chunk_overlap_tokens=8)
    runtime.reset()
    seen = {"batches": 0, "stored": 0}

    async def report(document):
        if document.stage.startswith("Indexed"):
            seen["batches"] += 1
            if seen["batches"] == 2:
                service = await runtime.ready_vector_service()
                seen["stored"] = await service.count(document_id=str(document.id))
                service.backend.release_sync()  # the store disappears (disk gone, server down)

    document = services.document_create(
        user=people["owner"], data=make_text(lorem_sentences(120, seed=9)), filename="big.txt", tags=[tags["finance"]]
    )
    result = services.document_ingest_sync(document.id, report=report)
    document.refresh_from_db()
    assert seen["stored"] == 6
    assert result.status == document.status == Document.Status.FAILED
    assert "search index" in document.error and document.chunk_count == 0
    # The store is back: before any other ingestion runs, the failed document's vectors are gone.
    runtime.reset()
    other = services.document_create(
        user=people["owner"], data=make_text(["A short note."]), filename="note.txt", tags=[tags["finance"]]
    )
    services.document_ingest_sync(other.id)
    assert _count(document_id=str(document.id)) == 0
    assert _count() == Document.objects.get(pk=other.pk).chunk_count
    # Retry: whole, once.
    services.document_requeue(document=document)
    services.document_ingest_sync(document.id)
    document.refresh_from_db()
    assert document.status == "ready"
    assert _count(document_id=str(document.id)) == document.chunk_count > 6
