"""Verified knowledge in a real browser: an answer citing verified knowledge shows who verified it
and when, and "Needs review" on knowledge that no longer is verified; the owner finds the latter in
the re-verify queue of their inbox (one marked by the server's own schedule because its review date
passed, one because a document it relied on was replaced) and re-verifies it, and the employee's
card follows after a reload. Daphne serves the app (subprocess, its own SQLite and embedded Qdrant);
the fake Ollama server is the model. Screenshots (1280 and 390 wide) go to test-artifacts/.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.browser.conftest import ARTIFACTS, seeded_server, signed_in

pytestmark = pytest.mark.browser

PASSWORD = "browser-pass-123"
VA_DOC = "7a1e0c55-2b8d-4f3a-9c61-0d2e4f6a8b10"
DUE_DOC = "7a1e0c55-2b8d-4f3a-9c61-0d2e4f6a8b11"
RELY_DOC = "7a1e0c55-2b8d-4f3a-9c61-0d2e4f6a8b12"
PARKING_DOC = "7a1e0c55-2b8d-4f3a-9c61-0d2e4f6a8b13"
VERIFIED_AT = timezone.now() - timedelta(days=20)
DUE_AT = timezone.now() - timedelta(days=200)
QUESTION = "How do visitors get a garage parking permit and where do they park?"
VA_QUESTION = "How do visitors get a garage parking permit?"

SETUP = r"""
import asyncio
from datetime import datetime, timedelta
from django.core.files.base import ContentFile
from django.utils import timezone
from documents.models import Document, Tag
from documents.services import document_ingest_sync, document_replace_file
from ragchat import runtime
from ragchat.models import User
from ragchat.services.types import ChunkRecord
from routing import knowledge
from routing.models import VerifiedAnswer

erin = User.objects.create_user(username="erin", password=%(pw)r, first_name="Erin", last_name="Walsh")
olivia = User.objects.create_user(username="olivia", password=%(pw)r, first_name="Olivia", last_name="Owens")
ada = User.objects.create_superuser(username="ada", password=%(pw)r, first_name="Ada", last_name="Admin")
facilities = Tag.objects.create(name="Facilities", slug="facilities", owner=olivia)
facilities.members.add(erin)
chunks = []

def doc(pk, title, text, **extra):
    d = Document(id=pk, title=title, original_filename=title + ".md", content_hash=pk.replace("-", "") * 2,
                 kind="markdown", status="ready", chunk_count=1, uploaded_by=olivia, **extra)
    d.file.save(title + ".md", ContentFile(text.encode()), save=False)
    d.save()
    d.tags.set([facilities])
    return d, text

def verified(pk, question, answer, by, at, relied=()):
    d, text = doc(pk, question, knowledge.knowledge_text(question=question, answer=answer))
    v = VerifiedAnswer.objects.create(tag=facilities, question=question, answer=answer, document=d, verified_by=by,
                                      verified_at=at, review_by=knowledge.review_by_for(facilities, today=at.date()),
                                      relied_on_versions={str(r.pk): {"title": r.title, "version": r.version} for r in relied})
    v.relied_on.set(relied)
    d.chunk_metadata = knowledge.knowledge_metadata(v)
    d.status, d.chunk_count = "queued", 0
    d.save()
    document_ingest_sync(pk)  # parsed, chunked and indexed as a published answer is
    return v

parking, parking_text = doc(%(parking)r, "Parking and Garage",
    "Parking: the company garage has 40 spaces for employees; a yearly permit comes from the facilities desk.")
chunks.append(ChunkRecord(document_id=parking.document_id, chunk_index=0, document_name=parking.title,
                          chunk_text=parking_text, tags=("facilities",)))
verified(%(va)r, %(va_question)r,
         "Reception issues visitors a day parking permit for the garage; visitors park on level -1.",
         ada, datetime.fromisoformat(%(verified_at)r))
verified(%(due)r, "Where do visitors park when the garage is full?",
         "When the garage is full, visitors park at the P2 lot across the street; reception validates the ticket.",
         olivia, datetime.fromisoformat(%(due_at)r))
verified(%(rely)r, "How many garage spaces do employees have?",
         "The company garage has 40 spaces for employees with a yearly permit.", olivia,
         datetime.fromisoformat(%(verified_at)r), relied=[parking])

runtime.reset()

async def index():
    service = await runtime.ready_vector_service()
    await service.upsert_chunks(chunks)
asyncio.run(index())
# The parking document gets a new version: the answer that relied on it needs review (the payload
# update runs here, while this process holds the store).
document_replace_file(document=parking, data=b"Parking: the garage now has 32 spaces.", filename="parking.md")
runtime.reset()
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory, ollama_server):
    server = seeded_server(
        tmp_path_factory,
        ollama_server,
        name="knowledge-browser",
        setup=SETUP
        % {
            "pw": PASSWORD,
            "va": VA_DOC,
            "va_question": VA_QUESTION,
            "due": DUE_DOC,
            "rely": RELY_DOC,
            "parking": PARKING_DOC,
            "verified_at": VERIFIED_AT.isoformat(),
            "due_at": DUE_AT.isoformat(),
        },
        extra_env={"RAGCHAT_SCHEDULE_MINUTES": "1"},
    )
    yield server.url
    server.stop()


def _day(at) -> str:
    at = timezone.localtime(at)
    return f"{at.day} {at.strftime('%b %Y')}"


def _card(page, n: int):
    """Open source n's card the way a reader does (click pins it) and return its text."""
    page.click(f"article.msg-assistant .cite[data-n='{n}'] .cite-marker")
    card = page.locator(f"article.msg-assistant .cite[data-n='{n}'] .cite-card").first
    card.wait_for(state="visible")
    return card.inner_text()


@pytest.mark.parametrize("width", [390, 1280])  # the 1280 run re-verifies: last
def test_cited_verified_knowledge_and_the_reverify_queue(server, chromium, fake_ollama, width):
    ARTIFACTS.mkdir(exist_ok=True)
    fake_ollama.reply(
        f"Reception issues visitors a day permit for the garage [SourceId: {VA_DOC}:0]. "
        f"When the garage is full, they park at the P2 lot [SourceId: {DUE_DOC}:0]."
    )
    fake_ollama.rating(100)
    erin_ctx, erin = signed_in(chromium, server, "erin", PASSWORD, width=width)
    erin.fill("#question", QUESTION)
    erin.keyboard.press("Enter")
    erin.wait_for_selector("article.msg-assistant.status-complete .cite-marker", timeout=20_000)
    erin.reload()  # the finished answer as the server renders it, with its cards
    erin.wait_for_selector("article.msg-assistant .cite-marker")
    session_url = erin.url

    # The server's schedule ran on its first request: the answer past its review date needs review.
    sources = erin.inner_text("article.msg-assistant .sources")
    assert f"✓ Verified by Ada Admin, {_day(VERIFIED_AT)}" in sources and "⚠ Needs review" in sources
    verified_card = _card(erin, 1)
    assert f"✓ Verified by Ada Admin, {_day(VERIFIED_AT)}" in verified_card
    # The published answer's question is its name, said once: not again as the place, nor as the
    # passage's first line (the card and the sources list).
    assert verified_card.count(VA_QUESTION) == 1 and "Reception issues visitors a day parking permit" in verified_card
    listed = erin.locator("article.msg-assistant .sources li").first.inner_text()
    assert listed.count(VA_QUESTION) == 1, listed
    erin.screenshot(path=str(ARTIFACTS / f"verified-cited-{width}.png"), full_page=False)
    review_card = _card(erin, 2)
    assert "Needs review: verified by Olivia Owens" in review_card and "✓ Verified" not in review_card
    erin.screenshot(path=str(ARTIFACTS / f"verified-cited-needs-review-{width}.png"), full_page=False)

    owner_ctx, owner = signed_in(chromium, server, "olivia", PASSWORD, width=width)
    owner.goto(server + "/routing/inbox/")
    queue = owner.locator("#reverify-queue")
    text = queue.inner_text()
    assert "Where do visitors park when the garage is full?" in text and "review date" in text
    assert "How many garage spaces do employees have?" in text
    assert "“Parking and Garage” was replaced by version 2" in text
    assert "How do visitors get a garage parking permit?" not in text  # still verified
    owner.screenshot(path=str(ARTIFACTS / f"verified-queue-{width}.png"), full_page=True)
    # All verified knowledge of the owner's tags, by status.
    owner.click("#reverify-queue a:has-text('All verified knowledge')")
    owner.wait_for_selector("h1:has-text('Verified knowledge')")
    assert owner.locator("#knowledge-list .inbox-row").count() == 3
    owner.click(".knowledge-filter a:has-text('Verified')")
    owner.wait_for_selector(".knowledge-filter a[aria-current=page]:has-text('Verified')")
    rows = owner.locator("#knowledge-list .inbox-row")
    assert rows.count() == 1 and "How do visitors get a garage parking permit?" in rows.inner_text()
    owner.goto(server + "/routing/knowledge/")
    owner.screenshot(path=str(ARTIFACTS / f"verified-list-{width}.png"), full_page=True)
    owner.goto(server + "/routing/inbox/")

    owner.click("#reverify-queue .inbox-row:has-text('How many garage spaces') a")
    owner.wait_for_selector("h1:has-text('How many garage spaces')")
    relied = owner.inner_text(".knowledge-sources")
    assert "Parking and Garage" in relied and "Replaced: now v2" in relied
    owner.screenshot(path=str(ARTIFACTS / f"verified-detail-{width}.png"), full_page=True)
    owner.goto(server + "/routing/inbox/")
    owner.click("#reverify-queue .inbox-row:has-text('Where do visitors park') a")
    owner.wait_for_selector("h1:has-text('Where do visitors park')")
    assert "has passed" in owner.inner_text("main")
    if width == 390:
        owner_ctx.close()
        erin_ctx.close()
        return
    owner.click("button:has-text('Re-verify as it is')")
    owner.wait_for_selector(".flash:has-text('Verified again by you')")
    assert "✓ Verified" in owner.inner_text(".question-tags")

    # The employee's old answer now shows the new verification, read at render time.
    erin.goto(session_url)
    erin.wait_for_selector("article.msg-assistant .cite-marker")
    assert f"✓ Verified by Olivia Owens, {_day(timezone.now())}" in _card(erin, 2)
    owner_ctx.close()
    erin_ctx.close()
