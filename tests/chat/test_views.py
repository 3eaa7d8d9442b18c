"""Chat pages over HTTP: the owner's list, new / rename / delete, history rendered server-side,
another user's session a 404."""

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
    response = signed_in.post(reverse("chat:new"))
    session = ChatSession.objects.get(owner=user)
    assert response.url == reverse("chat:session", args=[session.pk])
    signed_in.post(reverse("chat:rename", args=[session.pk]), {"title": "  Vacation questions  "})
    session.refresh_from_db()
    assert session.title == "Vacation questions"
    signed_in.post(reverse("chat:delete", args=[session.pk]))
    assert not ChatSession.objects.filter(pk=session.pk).exists()


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
    assert "Confidence 82%" in html and "Page 2" in html and "Section N/A" in html
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
