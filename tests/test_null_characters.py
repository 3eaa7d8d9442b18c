"""Text stored or searched in the database has no NUL character: PostgreSQL's text cannot hold one
(DataError, a server error); SQLite would store it. Refused alike on both, with a sentence: the
API's text fields (422, api.schemas.Text), and a question wherever it comes from
(chat.services.question_problem), as the web's Django forms refuse it
(ProhibitNullCharactersValidator)."""

from __future__ import annotations

import pytest
from django.test import Client

from api.services import token_create
from chat.models import ChatSession, Message

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
