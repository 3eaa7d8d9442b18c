"""Chat fixtures: users, sessions, a small indexed corpus, and a websocket client that goes through
the real ASGI application (session cookie auth, origin check, URL routing)."""

from __future__ import annotations

import json
import uuid

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.test import Client

from chat import turns
from chat.models import ChatSession
from ragchat.services.types import ChunkRecord

VACATION_DOC = str(uuid.UUID(int=0xA11CE, version=4))
EXPENSE_DOC = str(uuid.UUID(int=0xB0B, version=4))

CORPUS = [
    ChunkRecord(
        document_id=VACATION_DOC,
        chunk_index=0,
        document_name="Vacation Policy.pdf",
        chunk_text="Vacation policy: every employee receives 25 vacation days per year. Vacation days "
        "must be requested two weeks in advance through the HR portal.",
        tags=("public",),
        page_number=1,
        section="Annual leave",
    ),
    ChunkRecord(
        document_id=VACATION_DOC,
        chunk_index=1,
        document_name="Vacation Policy.pdf",
        chunk_text="Unused vacation days carry over to the next year, up to a maximum of five vacation days. "
        + "The vacation carry-over expires on March 31. " * 30,
        tags=("public",),
        page_number=2,
        section="Carry-over",
    ),
    ChunkRecord(
        document_id=EXPENSE_DOC,
        chunk_index=0,
        document_name="Expense Guide.docx",
        chunk_text="Expense reports for travel must include receipts. Meals are reimbursed up to 50 euros "
        "per day when travelling for work.",
        tags=("public",),
        page_number=None,
        section=None,
    ),
]


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="pw-alice-123", email="alice@example.com")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user(username="mallory", password="pw-mallory-123")


@pytest.fixture
def chat_session(user):
    return ChatSession.objects.create(owner=user)


@pytest.fixture
async def corpus(rag_runtime):
    """The corpus indexed in the test's embedded Qdrant (through the process's vector service)."""
    from ragchat import runtime

    service = await runtime.ready_vector_service()
    await service.upsert_chunks(CORPUS)
    return CORPUS


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[django_settings.SESSION_COOKIE_NAME].value


class ChatSocket:
    """A tab: connects through the real ASGI app with the user's session cookie."""

    def __init__(
        self,
        cookie: str | None,
        session_id,
        *,
        origin: str = "http://testserver",
        query: str = "",
        cookies: dict[str, str] | None = None,
    ) -> None:
        from ragchat.asgi import application

        headers = [(b"origin", origin.encode()), (b"host", b"testserver")]
        jar = {**({django_settings.SESSION_COOKIE_NAME: cookie} if cookie is not None else {}), **(cookies or {})}
        if jar:
            headers.append((b"cookie", "; ".join(f"{k}={v}" for k, v in jar.items()).encode()))
        path = f"/ws/chat/{session_id}/" + (f"?{query}" if query else "")
        self.comm = WebsocketCommunicator(application, path, headers=headers)
        self.frames: list[str] = []

    async def connect(self) -> bool:
        connected, _ = await self.comm.connect(timeout=5)
        return connected

    async def ask(self, question: str) -> None:
        await self.comm.send_to(text_data=json.dumps({"question": question, "HEADERS": {}}))

    async def send(self, data: dict) -> None:
        await self.comm.send_to(text_data=json.dumps(data))

    async def receive(self, timeout: float = 10) -> str:
        frame = await self.comm.receive_from(timeout=timeout)
        self.frames.append(frame)
        return frame

    async def until_final(self, timeout: float = 15) -> str:
        """Frames until the final render of an assistant message (outerHTML swap, not streaming)."""
        while True:
            frame = await self.receive(timeout)
            if (
                'class="msg msg-assistant status-' in frame
                and "status-streaming" not in frame
                and 'hx-swap-oob="true"' in frame
            ):
                return frame

    async def close(self) -> None:
        await self.comm.disconnect()


async def open_tab(user, session_id, **kwargs) -> ChatSocket:
    """A ChatSocket for `user` (None: anonymous), not yet connected."""
    from asgiref.sync import sync_to_async

    cookie = await sync_to_async(session_cookie)(user) if user is not None else None
    return ChatSocket(cookie, session_id, **kwargs)


@pytest.fixture
async def drain_turns():
    yield
    await turns.wait_idle(timeout=20)
