"""Routing fixtures: an asker, tag owners (present, missing, gone), an admin, a small corpus whose
documents exist both as Document rows (tags in the database) and as chunks in embedded Qdrant, and
functions that ask through the real chat websocket (fake Ollama, hashing embedder)."""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.test import Client

from chat import turns
from chat.models import ChatSession, Message
from documents.models import Document, Tag
from ragchat.mail import wait_sent
from ragchat.services.types import ChunkRecord
from tests.chat.conftest import open_tab, session_cookie

PARKING_DOC = str(uuid.UUID(int=0xCA2, version=4))
LAPTOP_DOC = str(uuid.UUID(int=0x1A7, version=4))
CONTRACT_DOC = str(uuid.UUID(int=0xC0, version=4))
CANTEEN_DOC = str(uuid.UUID(int=0xFEED, version=4))

PARKING_Q = "How do I get a parking permit for the company garage?"
LAPTOP_Q = "How do I get a replacement laptop charger from IT?"
CONTRACT_Q = "Who signs supplier contracts above the legal threshold?"
CANTEEN_Q = "What are the canteen opening hours on Fridays?"

# (document id, tag slug, name, text) — each question shares its words with one document only.
DOCS = [
    (
        PARKING_DOC,
        "facilities",
        "Parking.md",
        "Parking permit: the company garage has 40 spaces. A parking permit for the garage is requested "
        "from the facilities desk and renewed every year.",
    ),
    (
        LAPTOP_DOC,
        "it",
        "Laptops.md",
        "Laptop replacement: to get a replacement laptop charger from IT, open a ticket in the IT portal; "
        "IT replaces a broken laptop or charger within two days.",
    ),
    (
        CONTRACT_DOC,
        "legal",
        "Contracts.md",
        "Supplier contracts: contracts above the legal threshold of 50,000 euros are signed by two "
        "directors after a review by legal.",
    ),
    (
        CANTEEN_DOC,
        "public",
        "Canteen.md",
        "Canteen: the canteen opening hours are 11:30 to 14:00 from Monday to Friday; on Fridays the "
        "canteen closes at 13:30.",
    ),
]


@pytest.fixture
def asker(django_user_model):
    return django_user_model.objects.create_user(
        username="erin", password="pw-erin-123", email="erin@example.com", first_name="Erin", last_name="Asker"
    )


@pytest.fixture
def second_asker(django_user_model):
    return django_user_model.objects.create_user(username="sam", password="pw-sam-123", email="sam@example.com")


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user(
        username="olivia", password="pw-olivia-123", email="olivia@example.com", first_name="Olivia", last_name="Owner"
    )


@pytest.fixture
def stranger(django_user_model):
    return django_user_model.objects.create_user(username="mallory", password="pw-mallory-123", email="m@example.com")


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_user(
        username="root", password="pw-root-123", email="root@example.com", is_staff=True, is_superuser=True
    )


@pytest.fixture
def gone_owner(django_user_model):
    return django_user_model.objects.create_user(
        username="left", password="pw-left-123", email="left@example.com", is_active=False
    )


@pytest.fixture
def tags(owner, gone_owner, asker, second_asker):
    """facilities: owned by olivia; it: no owner; legal: owner's account deactivated."""
    facilities = Tag.objects.create(name="Facilities", slug="facilities", owner=owner)
    it = Tag.objects.create(name="IT", slug="it")
    legal = Tag.objects.create(name="Legal", slug="legal", owner=gone_owner)
    for tag in (facilities, it, legal):
        tag.members.add(asker, second_asker)
    return {
        "facilities": facilities,
        "it": it,
        "legal": legal,
        "public": Tag.objects.get_or_create(slug="public", defaults={"name": "Public"})[0],
    }


@pytest.fixture
async def corpus(rag_runtime, tags):
    from ragchat import runtime

    records = []
    for doc_id, slug, name, text in DOCS:
        await sync_to_async(_document_row)(doc_id, slug, name, text)
        records.append(
            ChunkRecord(
                document_id=doc_id, chunk_index=0, document_name=name, chunk_text=text, tags=(slug,), section=None
            )
        )
    service = await runtime.ready_vector_service()
    await service.upsert_chunks(records)
    return records


def _document_row(doc_id: str, slug: str, name: str, text: str) -> None:
    document = Document.objects.create(
        id=doc_id,
        title=name,
        original_filename=name,
        file=f"originals/default/{doc_id}.md",
        content_hash=uuid.uuid4().hex,
        kind="markdown",
        status=Document.Status.READY,
        chunk_count=1,
    )
    document.tags.set(Tag.objects.filter(slug=slug))


@pytest.fixture
async def drain_turns():
    yield
    await turns.wait_idle(timeout=20)


def low_confidence(fake) -> None:
    """The model hedges and rates itself low: the answer is ROUTEd."""
    fake.reply("I am not sure about that.")
    fake.rating(0)


def high_confidence(fake) -> None:
    fake.reply_citing(1, words=30)
    fake.rating(100)


async def ask(user, question: str, *, session=None) -> tuple[ChatSession, Message]:
    """Ask through the chat websocket and wait until the turn (and its routing, emails included) is done."""
    if session is None:
        session = await ChatSession.objects.acreate(owner=user)
    tab = await open_tab(user, session.pk)
    assert await tab.connect()
    await tab.ask(question)
    await tab.until_final()
    await turns.wait_idle()
    assert wait_sent()  # the turn queued its emails (a routed question's) to the mail thread
    await tab.close()
    answer = await Message.objects.filter(session=session, role="assistant").order_by("-id").afirst()
    return session, answer


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


class InboxSocket:
    def __init__(self, cookie: str | None, path: str = "/ws/inbox/") -> None:
        from ragchat.asgi import application

        headers = [(b"origin", b"http://testserver"), (b"host", b"testserver")]
        if cookie is not None:
            headers.append((b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={cookie}".encode()))
        self.comm = WebsocketCommunicator(application, path, headers=headers)

    async def connect(self) -> bool:
        connected, _ = await self.comm.connect(timeout=5)
        return connected

    async def receive(self, timeout: float = 5) -> str:
        """One frame: HTML fragments with hx-swap-oob (the htmx ws extension applies them)."""
        return await self.comm.receive_from(timeout=timeout)

    async def close(self) -> None:
        await self.comm.disconnect()


async def open_inbox(user, path: str = "/ws/inbox/") -> InboxSocket:
    """The inbox page's websocket, or (path="/ws/nav/") any other page's navigation badges."""
    cookie = await sync_to_async(session_cookie)(user) if user is not None else None
    return InboxSocket(cookie, path)
