"""Routing embeds the question before it opens its write transaction: an open write transaction holds
SQLite's write lock, and every other writer (chat turns, ingestion progress) would wait for the
embedding to finish."""

from __future__ import annotations

import dataclasses

import pytest
from asgiref.sync import async_to_sync
from django.db import connections, transaction

from chat.models import ChatSession, Message
from ragchat import runtime
from ragchat.services.embeddings import HashingEmbedder
from routing.models import RoutedQuestion
from routing.services import question_escalate, question_route

pytestmark = pytest.mark.django_db(transaction=True)


class AtomicBlockRecorder(HashingEmbedder):
    """The hashing embedder, noting for each query embedding whether the test thread's database
    connection was inside a transaction (the embedding itself runs on an event loop's thread, whose
    connection is another one)."""

    def __init__(self) -> None:
        super().__init__(dimension=384)
        self.connection = connections["default"]  # the connection of the thread that builds it
        self.in_atomic_block: list[bool] = []

    async def embed_query(self, text: str) -> list[float]:
        self.in_atomic_block.append(self.connection.in_atomic_block)
        return await super().embed_query(text)


@pytest.fixture
def recorder(rag_runtime) -> AtomicBlockRecorder:
    embedder = AtomicBlockRecorder()
    runtime.install(dataclasses.replace(runtime.components(), embedder=embedder))
    return embedder


def answer(asker, *, action: str, route_target: dict | None = None) -> Message:
    session = ChatSession.objects.create(owner=asker)
    question = Message.objects.create(session=session, role=Message.Role.USER, content="When does the canteen open?")
    return Message.objects.create(
        session=session,
        role=Message.Role.ASSISTANT,
        content="I am not sure about that.",
        status=Message.Status.COMPLETE,
        action=action,
        route_target=route_target,
        retrieval_query="canteen opening hours",
        reply_to=question,
    )


def test_the_recorder_sees_a_transaction(recorder):
    # The checks below are only worth something if the recorder can tell.
    async_to_sync(recorder.embed_query)("outside")
    with transaction.atomic():
        async_to_sync(recorder.embed_query)("inside")
    assert recorder.in_atomic_block == [False, True]


def test_a_routed_answer_is_embedded_before_the_transaction(recorder, asker, tags):
    route = {
        "tag": "facilities",
        "owner_user_id": str(tags["facilities"].owner_id),
        "owner_email": "olivia@example.com",
        "reason": "Low confidence: 20% - routing to facilities owner",
        "fallback": False,
    }
    question = question_route(message=answer(asker, action="ROUTE", route_target=route))
    assert recorder.in_atomic_block == [False]
    assert question.group.embedding and question.group.embedding_model == "hashing-384"
    assert question.target == tags["facilities"].owner and not question.fallback


def test_an_escalated_answer_is_embedded_before_the_transaction(recorder, asker, tags):
    question = question_escalate(user=asker, message=answer(asker, action="CITE"))
    assert recorder.in_atomic_block == [False]
    assert question.group.embedding and question.origin == RoutedQuestion.Origin.MANUAL
