"""Chat pages over HTTP: the owner's list, new / rename / delete, history rendered server-side,
another user's session a 404."""

import re
import uuid

import pytest
from django.urls import reverse

from chat.models import ChatSession, Message

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def test_home_lists_own_sessions_newest_first(signed_in, user, other_user):
    older = ChatSession.objects.create(owner=user, title="Older chat")
    newer = ChatSession.objects.create(owner=user, title="Newer chat")
    ChatSession.objects.create(owner=other_user, title="Someone else's")
    html = signed_in.get("/").content.decode()
    assert html.index("Newer chat") < html.index("Older chat")
    assert "Someone else" not in html
    assert newer.pk and older.pk


def test_login_required(client, chat_session):
    assert client.get("/").status_code == 302
    assert client.get(reverse("chat:session", args=[chat_session.pk])).status_code == 302


def test_new_rename_delete(signed_in, user):
    response = signed_in.post(reverse("chat:new"), {"question": "How many vacation days do I get?"})
    session = ChatSession.objects.get(owner=user)
    assert response.url == reverse("chat:session", args=[session.pk])
    signed_in.post(reverse("chat:rename", args=[session.pk]), {"title": "  Vacation questions  "})
    session.refresh_from_db()
    assert session.title == "Vacation questions"
    signed_in.post(reverse("chat:delete", args=[session.pk]))
    assert not ChatSession.objects.filter(pk=session.pk).exists()


def test_delete_without_script_asks_first_on_a_page_of_its_own(signed_in, user):
    """The chat menu's Delete leads, without script, to a page that asks (GET changes nothing); its
    Delete posts, its Cancel goes back to the chat. With script (htmx) the menu asks in a dialog and
    posts at once; the server sends the browser home."""
    session = ChatSession.objects.create(owner=user, title="Budget <questions>")
    url = reverse("chat:delete", args=[session.pk])
    menu = signed_in.get(reverse("chat:session", args=[session.pk])).content.decode()
    link = re.search(r"<a [^>]*data-confirm=\"Delete this chat and all its messages\?\"[^>]*>", menu).group(0)
    assert f'href="{url}"' in link and f'hx-post="{url}"' in link

    page = signed_in.get(url)
    html = page.content.decode()
    assert page.status_code == 200 and "<title>Delete this chat? · ragchat</title>" in html
    assert 'class="topbar"' in html and "css/app.css" in html  # the product's layout
    assert "<h1" in html and "Delete this chat?" in html and "“Budget &lt;questions&gt;”" in html
    assert re.search(rf'<form method="post" action="{url}">\s*<input type="hidden" name="csrfmiddlewaretoken"', html)
    assert f'href="{reverse("chat:session", args=[session.pk])}">Cancel</a>' in html
    assert ChatSession.objects.filter(pk=session.pk).exists()

    response = signed_in.post(url)
    assert response.status_code == 302 and response.url == reverse("home")
    assert not ChatSession.objects.filter(pk=session.pk).exists()

    session = ChatSession.objects.create(owner=user, title="Asked in a dialog")
    response = signed_in.post(reverse("chat:delete", args=[session.pk]), HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and response["HX-Redirect"] == reverse("home")
    assert not ChatSession.objects.filter(pk=session.pk).exists()


def test_another_persons_chat_has_no_delete_page(client, other_user, chat_session):
    client.force_login(other_user)
    theirs = client.get(reverse("chat:delete", args=[chat_session.pk]))
    missing = client.get(reverse("chat:delete", args=[uuid.uuid4()]))
    assert theirs.status_code == missing.status_code == 404
    main = [re.search(r"<main\b.*?</main>", r.content.decode(), re.DOTALL).group(0) for r in (theirs, missing)]
    assert main[0] == main[1] and "Page not found" in main[0] and chat_session.title not in theirs.content.decode()
    assert ChatSession.objects.filter(pk=chat_session.pk).exists()


def test_other_users_session_is_404(client, other_user, chat_session):
    client.force_login(other_user)
    for name in ("chat:session",):
        assert client.get(reverse(name, args=[chat_session.pk])).status_code == 404
    for name in ("chat:rename", "chat:delete"):
        assert client.post(reverse(name, args=[chat_session.pk]), {"title": "x"}).status_code == 404
    assert ChatSession.objects.filter(pk=chat_session.pk, title="New chat").exists()


def test_session_page_renders_history_with_markers_escaped(signed_in, chat_session):
    doc = "3f1c2a4e-8b7d-4c6e-9a1b-2d3e4f5a6b7c"
    user_msg = Message.objects.create(session=chat_session, role="user", content="<script>alert(1)</script> days?")
    citation = {
        "source_id": f"{doc}:0",
        "document_id": doc,
        "document_name": "Policy <b>.pdf",
        "chunk_index": 0,
        "page_number": 2,
        "section": None,
        "relevance_score": 0.81,
        "snippet": "25 days...",
        "snippet_full": "25 days a year",
        "metadata": {},
    }
    Message.objects.create(
        session=chat_session,
        role="assistant",
        reply_to=user_msg,
        status="complete",
        content=f"You get **25 days** [SourceId: {doc}:0] <img src=https://evil.example/x.png>",
        citations=[citation],
        confidence={"overall": 82, "retrieval": 0.8, "coverage": 0.7, "llm": 90},
        action="CITE",
    )
    html = signed_in.get(reverse("chat:session", args=[chat_session.pk])).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html
    assert "<strong>25 days</strong>" in html and 'class="cite-marker"' in html
    assert "Policy &lt;b&gt;.pdf" in html and "Relevance 81%" in html
    assert "<img" not in html.split('id="messages"')[1]
    assert "Confidence 82%" in html and "Page 2 · Relevance" in html and "N/A" not in html
    assert 'ws-connect="/ws/chat/' in html and "hx-ws-2" in html


def test_opening_a_session_sends_session_opened_once(signed_in, user, chat_session):
    from chat.signals import session_opened

    calls = []

    def receiver(sender, session, user, **kwargs):
        calls.append((session.pk, user.pk))

    session_opened.connect(receiver, dispatch_uid="test.session_opened_once")
    try:
        assert signed_in.get(reverse("chat:session", args=[chat_session.pk])).status_code == 200
    finally:
        session_opened.disconnect(dispatch_uid="test.session_opened_once")
    assert calls == [(chat_session.pk, user.pk)]


def test_landing_page_offers_the_composer(signed_in):
    page = signed_in.get("/").content.decode()
    assert 'id="composer"' in page and 'action="/chat/new/"' in page and 'name="question"' in page
    assert "/ 2,000" in page  # the length limit, next to the counter


def test_a_new_chat_begins_with_its_first_question(signed_in, user):
    from chat.models import Message

    # No question, no chat: "New chat" does not leave empty chats behind.
    assert signed_in.post(reverse("chat:new")).url == reverse("home")
    assert signed_in.post(reverse("chat:new"), {"question": "   "}).url == reverse("home")
    assert not ChatSession.objects.filter(owner=user).exists()

    response = signed_in.post(reverse("chat:new"), {"question": "  Where do I park my bike?  "})
    session = ChatSession.objects.get(owner=user)
    assert response.url == reverse("chat:session", args=[session.pk])
    assert session.title == "Where do I park my bike?"
    assert [(m.role, m.content) for m in Message.objects.filter(session=session)] == [
        ("user", "Where do I park my bike?")
    ]
    # The page's websocket starts the pending question's answer.
    page = signed_in.get(response.url).content.decode()
    assert f'ws-connect="/ws/chat/{session.pk}/?start=1"' in page


def test_a_refused_first_question_comes_back_with_its_text_and_reason(signed_in, user):
    long_question = "Why " + "really " * 400
    response = signed_in.post(reverse("chat:new"), {"question": long_question})
    # Post/redirect/get: the landing page says why, with the text in the box; reloading it asks
    # nothing again (the browser's address is the landing page's, not the form's).
    assert response.status_code == 302 and response.url == reverse("home")
    page = signed_in.get(response.url).content.decode()
    assert "Your question is too long (" in page and "please keep it under 2000 characters" in page
    assert long_question.strip() in page  # the text is still in the box
    reloaded = signed_in.get(reverse("home")).content.decode()
    assert "too long" not in reloaded and long_question.strip() not in reloaded
    assert not ChatSession.objects.filter(owner=user).exists()


def test_an_empty_first_question_is_told_what_to_do(signed_in, user):
    response = signed_in.post(reverse("chat:new"), {"question": "  \n "})
    assert response.url == reverse("home")
    assert "Type your question first, then send it." in signed_in.get(response.url).content.decode()
    assert not ChatSession.objects.filter(owner=user).exists()


def _results(response) -> str:
    """The search page's results (the sidebar beside them lists the recent chats)."""
    page = response.content.decode()
    return page[page.index('id="search-results"') :]


def test_search_finds_own_chats_by_title_and_message_as_seen_now(signed_in, user, other_user):
    from chat import services
    from chat.models import Message

    mine = services.session_create(user=user, title="Bike parking")
    services.message_create_user(session=mine, content="Where can I leave my bicycle overnight?")
    Message.objects.create(
        session=mine, role="assistant", status="complete", content="Bicycles stay in the **basement** garage."
    )
    other = services.session_create(user=user, title="Expenses")
    services.message_create_user(session=other, content="How do I claim a taxi receipt?")
    theirs = services.session_create(user=other_user, title="Basement secrets")
    services.message_create_user(session=theirs, content="The basement code is 4711")

    page = _results(signed_in.get(reverse("chat:search"), {"q": "basement"}))
    assert "Bike parking" in page and "Bicycles stay in the basement garage." in page  # an excerpt, plain text
    assert "Expenses" not in page and "Basement secrets" not in page and "4711" not in page
    assert "1 chat matching" in page
    assert "Bike parking" in _results(signed_in.get(reverse("chat:search"), {"q": "BIKE"}))  # the title
    # htmx asks for the sidebar's list only; an emptied box gives the recent chats back.
    part = signed_in.get(reverse("chat:search"), {"q": "taxi"}, headers={"HX-Request": "true"}).content.decode()
    assert part.startswith('<nav class="session-list" id="session-list"') and "Expenses" in part
    assert "Bike parking" not in part
    recent = signed_in.get(reverse("chat:search"), {"q": ""}, headers={"HX-Request": "true"}).content.decode()
    assert "Bike parking" in recent and "Expenses" in recent
    assert signed_in.get(reverse("chat:search"), {"q": " "}).url == reverse("home")


def test_search_skips_answers_withheld_from_their_asker(signed_in, user):
    """An answer built from a document its asker can no longer read is withheld when shown, and so
    it does not match a search either."""
    import uuid

    from chat import services
    from chat.models import Message
    from documents.models import Document, Tag

    tag = Tag.objects.create(name="Secret", slug="secret", tenant_id=user.tenant_id)
    doc = Document.objects.create(title="Secret plan", original_filename="s.txt", content_hash="x", size=1)
    doc.tags.add(tag)
    source = {"source_id": f"{doc.pk}:0", "document_id": str(doc.pk), "document_name": "Secret plan"}
    session = services.session_create(user=user, title="Plans")
    services.message_create_user(session=session, content="What is the plan?")
    Message.objects.create(
        session=session, role="assistant", status="complete", content="The plan is zeppelin.", citations=[source]
    )
    assert uuid.UUID(str(doc.pk))
    page = _results(signed_in.get(reverse("chat:search"), {"q": "zeppelin"}))
    assert "No chat mentions" in page and "Plans" not in page


def _answered_chat(user):
    from chat import services
    from chat.models import Message

    session = services.session_create(user=user, title="Vacation days")
    question = services.message_create_user(session=session, content="How many vacation days do I get?")
    doc = "3f1c2a4e-8b7d-4c6e-9a1b-2d3e4f5a6b7c"
    source = {
        "source_id": f"{doc}:0",
        "document_id": doc,
        "document_name": "Vacation Policy.pdf",
        "page_number": 3,
        "section": "Annual leave",
        "snippet": "Every full-time employee receives 25 days.",
    }
    Message.objects.create(
        session=session,
        role="assistant",
        status="complete",
        reply_to=question,
        content=f"You get **25 days** [SourceId: {doc}:0].\n\n```python\nprint('hi')\n```",
        citations=[source],
        passages=[source],
    )
    return session


def test_export_markdown_keeps_citations_as_numbers_with_sources(signed_in, user):
    session = _answered_chat(user)
    response = signed_in.get(reverse("chat:export_md", args=[session.pk]))
    assert response["Content-Type"].startswith("text/markdown")
    assert response["Content-Disposition"] == 'attachment; filename="vacation-days.md"'
    text = response.content.decode()
    assert text.startswith("# Vacation days\n")
    assert "## You · " in text and "How many vacation days do I get?" in text
    assert "You get **25 days** [1]." in text and "SourceId" not in text
    assert "- [1] Vacation Policy.pdf (page 3, Annual leave)" in text
    assert "```python\nprint('hi')\n```" in text


def test_export_pdf_is_a_real_pdf_with_the_answer_and_its_sources(signed_in, user):
    import io

    from pypdf import PdfReader

    session = _answered_chat(user)
    response = signed_in.get(reverse("chat:export_pdf", args=[session.pk]))
    assert response["Content-Type"] == "application/pdf" and response.content.startswith(b"%PDF")
    text = " ".join(" ".join(page.extract_text().split()) for page in PdfReader(io.BytesIO(response.content)).pages)
    assert "Vacation days" in text and "How many vacation days do I get?" in text
    assert "You get 25 days [1]." in text and "[1] Vacation Policy.pdf (page 3, Annual leave)" in text
    assert "Page 1 of 1" in text


def test_another_persons_chat_does_not_export(client, other_user, user):
    session = _answered_chat(user)
    client.force_login(other_user)
    assert client.get(reverse("chat:export_md", args=[session.pk])).status_code == 404
    assert client.get(reverse("chat:export_pdf", args=[session.pk])).status_code == 404


def test_pin_and_archive(signed_in, user):
    from chat import services

    older = services.session_create(user=user, title="Older chat")
    newer = services.session_create(user=user, title="Newer chat")
    page = signed_in.get("/").content.decode()
    assert page.index("Newer chat") < page.index("Older chat")

    signed_in.post(reverse("chat:pin", args=[older.pk]), {"value": "1"})
    page = signed_in.get("/").content.decode()
    assert page.index("Older chat") < page.index("Newer chat") and 'aria-label="Pinned"' in page
    older.refresh_from_db()
    assert older.pinned_at is not None

    response = signed_in.post(reverse("chat:archive", args=[newer.pk]), {"value": "1"})
    assert response.url == reverse("chat:archived")
    page = signed_in.get("/").content.decode()
    assert "Newer chat" not in page and "Archived chats (1)" in page
    archive = signed_in.get(reverse("chat:archived")).content.decode()
    assert "Newer chat" in archive[archive.index("<h1>Archived chats") :]
    assert "Newer chat" in _results(signed_in.get(reverse("chat:search"), {"q": "newer"}))  # still searchable

    signed_in.post(reverse("chat:archive", args=[newer.pk]), {"value": "0"})
    signed_in.post(reverse("chat:pin", args=[older.pk]), {"value": "0"})
    page = signed_in.get("/").content.decode()
    assert "Archived chats (" not in page and page.index("Newer chat") < page.index("Older chat")


def test_the_sidebar_stays_usable_with_hundreds_of_chats(signed_in, user, django_assert_max_num_queries):
    """250 chats: the page lists the 100 most recent (pinned first), says how to reach the rest,
    runs a bounded number of queries, and search finds the oldest."""
    from django.utils import timezone

    from chat import services
    from chat.models import ChatSession
    from chat.selectors import SIDEBAR_SESSIONS

    ChatSession.objects.bulk_create(ChatSession(owner=user, title=f"Chat number {i:03d}") for i in range(250))
    oldest = ChatSession.objects.filter(owner=user).order_by("updated_at", "id").first()
    oldest.pinned_at = timezone.now()
    oldest.save(update_fields=["pinned_at"])
    services.session_create(user=user, title="Holiday plans")
    with django_assert_max_num_queries(25):
        page = signed_in.get(reverse("home")).content.decode()
    assert page.count('class="session-link') == SIDEBAR_SESSIONS == 100
    assert "Showing the 100 most recent: search to find older ones." in page
    first_link = page.split('class="session-link')[1]
    assert oldest.title in first_link and 'aria-label="Pinned"' in first_link  # the pinned one heads the list
    found = _results(signed_in.get(reverse("chat:search"), {"q": "Chat number 000"}))
    assert "Chat number 000" in found


def test_a_finished_answer_is_stored_and_shown_without_looking_for_votes_or_routes(chat_session):
    """Nobody can have voted on an answer, or sent it to a person, before it is finished: the turn's
    last write renders it without asking the database (one trip per answer, in a burst of 200)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from chat import services, turns

    question = services.message_create_user(session=chat_session, content="How many vacation days do I get?")
    draft = services.message_create_draft(reply_to=question)
    with CaptureQueriesContext(connection) as queries:
        message, html = turns._store(draft.pk, {"content": "Twenty-five days.", "status": "complete"})
    read = " ".join(query["sql"] for query in queries)
    assert message.status == "complete" and "Twenty-five days." in html
    assert "routing_routedquestion" not in read and "chat_answerfeedback" not in read, read
