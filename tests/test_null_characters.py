"""Text stored or searched in the database has no NUL character: PostgreSQL's text cannot hold one
(DataError, a server error); SQLite would store it. Refused alike on both, with a sentence: the
API's text fields (422, api.schemas.Text), a question wherever it comes from
(chat.services.question_problem), and every other query or form value of a web page
(ragchat.middleware.NullCharacterMiddleware: 400), the fields the views read themselves included,
which Django's forms (ProhibitNullCharactersValidator) never see."""

from __future__ import annotations

import uuid

import pytest
from django.core.files.base import ContentFile
from django.test import Client
from django.urls import reverse

from api.services import token_create
from chat.models import AnswerFeedback, ChatSession, Message
from documents.models import Document, Tag
from ragchat.middleware import NULL_CHARACTER_REFUSAL
from routing.models import RoutedQuestion

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(django_user_model) -> Client:
    ann = django_user_model.objects.create_user("ann", password="pw-ann-12345")
    secret = token_create(user=ann, name="t", scopes=["read", "chat", "upload", "answer"], expires_in_days=1).secret
    return Client(HTTP_AUTHORIZATION=f"Bearer {secret}", raise_request_exception=False)


def _refused(response, field: str) -> None:
    assert response.status_code == 422, response.content[:300]
    body = response.json()
    assert body["code"] == "validation_error" and body["message"].startswith(f"{field}: "), body
    assert "null characters are not allowed" in body["message"] and body["message"].endswith("."), body


def test_a_tag_filter_with_a_null_character_is_a_422(api):
    _refused(api.get("/api/v1/documents", {"tag": "alpha\x00"}), "tag")


def test_a_question_with_a_null_character_is_a_422_and_nothing_is_stored(api):
    _refused(api.post("/api/v1/chat", {"question": "How many\x00 days?"}, content_type="application/json"), "question")
    _refused(api.get("/api/v1/search", {"q": "How many\x00 days?"}), "q")
    assert not Message.objects.exists()


def test_an_answer_with_a_null_character_is_a_422(api):
    response = api.post("/api/v1/questions/1/answer", {"answer": "Five\x00 days."}, content_type="application/json")
    _refused(response, "answer")


def test_a_new_chat_whose_question_has_a_null_character_is_refused_with_a_sentence(django_user_model):
    web = Client()
    web.force_login(django_user_model.objects.create_user("bo", password="pw-bo-12345"))
    page = web.post("/chat/new/", {"question": "How many\x00 vacation days carry over?"}, follow=True)
    assert page.redirect_chain == [("/", 302)] and "Your question contains a null character" in page.content.decode()
    assert not ChatSession.objects.exists()


# ----------------------------------------------------------------------------------- the web's own reads


@pytest.fixture
def web(django_user_model, settings, tmp_path):
    """Ann's chat with a cited answer she down-voted, the review item it made for Olga (the tag's
    owner), and Olga's document."""
    settings.MEDIA_ROOT = tmp_path / "media"
    ann = django_user_model.objects.create_user("ann", password="pw-ann-12345")
    olga = django_user_model.objects.create_user("olga", password="pw-olga-12345")
    tag = Tag.objects.create(name="Travel", slug="travel", owner=olga)
    tag.members.add(ann)
    doc = Document(
        title="Travel policy",
        original_filename="travel.txt",
        content_hash=uuid.uuid4().hex,
        kind="text",
        status=Document.Status.READY,
        uploaded_by=olga,
    )
    doc.file.save("travel.txt", ContentFile(b"Trains, not planes."), save=False)
    doc.save()
    doc.tags.set([tag])
    session = ChatSession.objects.create(owner=ann, title="Trip plans")
    asked = Message.objects.create(session=session, role="user", content="Train or plane?")
    cite = {"source_id": f"{doc.pk}:0", "document_id": str(doc.pk), "document_name": doc.title, "snippet": "Trains"}
    answer = Message.objects.create(
        session=session, role="assistant", content="Trains [1].", citations=[cite], passages=[cite], reply_to=asked
    )
    item = RoutedQuestion.objects.create(
        tenant_id=ann.tenant_id,
        asker=ann,
        session=session,
        message=answer,
        tag=tag,
        target=olga,
        question="Train or plane?",
        origin=RoutedQuestion.Origin.FEEDBACK,
        citations=[cite],
    )
    clients = {}
    for user in (ann, olga):
        clients[user.username] = Client(raise_request_exception=False)
        clients[user.username].force_login(user)
    return {"clients": clients, "session": session, "answer": answer, "item": item, "doc": doc}


def _fields(web):
    """(who, method, address, data) for each value a view reads from request.POST or request.GET
    itself, with a NUL in it."""
    s, a, i, d = web["session"], web["answer"], web["item"], web["doc"]
    return {
        "vote reason": ("ann", "post", reverse("routing:feedback", args=[a.pk]), {"vote": "-1", "reason": "wrong\x00"}),
        "vote comment": (
            "ann",
            "post",
            reverse("routing:feedback", args=[a.pk]),
            {"vote": "-1", "reason": "wrong", "comment": "Planes\x00 are faster"},
        ),
        "chat title": ("ann", "post", reverse("chat:rename", args=[s.pk]), {"title": "Trip\x00 plans 2"}),
        "chat search": ("ann", "get", reverse("chat:search"), {"q": "tra\x00in"}),
        "review dismiss note": (
            "olga",
            "post",
            reverse("routing:review_dismiss", args=[i.pk]),
            {"note": "The answer\x00 stands."},
        ),
        "review outdated note": (
            "olga",
            "post",
            reverse("routing:review_outdated", args=[i.pk]),
            {"document": str(d.pk), "note": "Planes\x00 now"},
        ),
        "document title": ("olga", "post", reverse("documents:rename", args=[d.pk]), {"title": "Travel\x00 rules"}),
        "document viewer": ("olga", "get", reverse("documents:view", args=[d.pk]), {"show": "chunks\x00"}),
        "knowledge filter": ("olga", "get", reverse("routing:knowledge"), {"status": "open\x00"}),
    }


def _unchanged(web) -> None:
    s, i, d = web["session"], web["item"], web["doc"]
    s.refresh_from_db()
    i.refresh_from_db()
    d.refresh_from_db()
    assert s.title == "Trip plans" and d.title == "Travel policy" and d.outdated_at is None
    assert i.status == RoutedQuestion.Status.OPEN and not i.resolution_note
    assert not AnswerFeedback.objects.exists()


FIELDS = [
    "vote reason",
    "vote comment",
    "chat title",
    "chat search",
    "review dismiss note",
    "review outdated note",
    "document title",
    "document viewer",
    "knowledge filter",
]


@pytest.mark.parametrize("field", FIELDS)
def test_a_null_character_in_a_field_a_view_reads_itself_is_a_400_with_a_sentence(web, field):
    who, method, url, data = _fields(web)[field]
    assert set(_fields(web)) == set(FIELDS)
    response = getattr(web["clients"][who], method)(url, data)
    assert response.status_code == 400, (field, response.status_code)
    page = response.content.decode()
    assert NULL_CHARACTER_REFUSAL in page and "Go back, remove it and try again." in page
    _unchanged(web)


@pytest.mark.parametrize("field", ["vote comment", "chat title", "review dismiss note"])
def test_an_htmx_action_gets_the_sentence_in_the_message_area_and_the_page_stays(web, field):
    who, method, url, data = _fields(web)[field]
    response = getattr(web["clients"][who], method)(url, data, HTTP_HX_REQUEST="true")
    assert response.status_code == 400 and response["HX-Retarget"] == "#flash"
    assert f"{NULL_CHARACTER_REFUSAL} Remove it and try again." in response.content.decode()
    _unchanged(web)


def test_the_same_values_without_the_null_character_go_through(web):
    """The refusal is the NUL's alone: the fixture's addresses take the same values without it."""
    for field, (who, method, url, data) in _fields(web).items():
        clean = {k: v.replace("\x00", "") for k, v in data.items()}
        response = getattr(web["clients"][who], method)(url, clean)
        assert response.status_code in (200, 302), (field, response.status_code)
