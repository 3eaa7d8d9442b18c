"""Personal access tokens: made on the person's own page (secret shown once, stored as a hash,
audited), scoped, expiring, revoked by their person or an admin of the tenant; a token acts as its
person and never more; per-token rate limits answer 429 with Retry-After; every error has one shape."""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from access.models import AuditEvent
from api.models import AccessToken
from api.services import token_create

pytestmark = pytest.mark.django_db

ALL = ["read", "chat", "upload", "answer"]


@pytest.fixture
def people(django_user_model):
    mk = django_user_model.objects.create_user
    return {
        "ann": mk("ann", password="pw-ann-12345", first_name="Ann"),
        "bob": mk("bob", password="pw-bob-12345", first_name="Bob"),
        "root": mk("root", password="pw-root-12345", is_superuser=True, is_staff=True),
        "tess": mk("tess", password="pw-tess-12345", tenant_id="t2"),
        "troot": mk("troot", password="pw-troot-12345", tenant_id="t2", is_superuser=True),
    }


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def bearer(secret: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {secret}")


def assert_error_shape(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) - {"details"} == {"code", "message", "request_id"}, body
    assert body["code"] == code and body["message"] and body["request_id"] == response["X-Request-ID"]
    return body


def test_the_page_makes_a_token_shows_the_secret_once_and_stores_its_hash(people):
    client = signed_in(people["ann"])
    posted = client.post("/api/tokens/", {"name": "Slack bot", "scopes": ["read", "chat"], "expires_in_days": "30"})
    # Post/redirect/get: the POST answers with a redirect, never with the secret.
    assert posted.status_code == 302 and posted["Location"] == "/api/tokens/"
    assert "rct_" not in posted.content.decode()
    page = client.get("/api/tokens/")
    assert page.status_code == 200
    assert "no-store" in page["Cache-Control"] or "max-age=0" in page["Cache-Control"]
    secret = re.search(r'value="(rct_[0-9a-f]{12}_[\w-]+)"', page.content.decode()).group(1)
    token = AccessToken.objects.get(user=people["ann"])
    assert token.name == "Slack bot" and token.scopes == ["chat", "read"]
    assert token.secret_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in str(AccessToken.objects.filter(pk=token.pk).values().first())  # only the hash is kept
    assert timedelta(days=29) < token.expires_at - timezone.now() <= timedelta(days=30)
    # Shown once: the list afterwards names the token by its prefix only.
    again = client.get("/api/tokens/").content.decode()
    assert "Slack bot" in again and token.prefix in again and secret not in again
    assert secret not in str(dict(client.session))  # nor is it kept once shown
    event = AuditEvent.objects.get(action=AuditEvent.Action.TOKEN_CREATED)
    assert event.actor == people["ann"] and "Slack bot" in event.summary and secret not in event.summary
    # The token works, as Ann.
    assert bearer(secret).get("/api/v1/sessions").status_code == 200


def test_reloading_the_page_after_making_a_token_makes_no_second_one(people):
    client = signed_in(people["ann"])
    form = {"name": "Build bot", "scopes": ["read"], "expires_in_days": "30"}
    shown = client.post("/api/tokens/", form, follow=True)
    assert shown.redirect_chain == [("/api/tokens/", 302)]
    assert "“Build bot” is ready" in shown.content.decode()
    reloaded = client.get("/api/tokens/")  # what a reload of the page that shows the secret sends
    assert reloaded.status_code == 200 and "is ready" not in reloaded.content.decode()
    assert AccessToken.objects.filter(user=people["ann"]).count() == 1
    # Only the browser that made it shows the secret: Ann signed in elsewhere sees the token's name.
    elsewhere = signed_in(people["ann"])
    client.post("/api/tokens/", {**form, "name": "Second"})
    assert "“Second” is ready" not in elsewhere.get("/api/tokens/").content.decode()
    assert "“Second” is ready" in client.get("/api/tokens/").content.decode()


def test_bad_token_forms_are_refused_with_a_sentence_and_nothing_made(people):
    client = signed_in(people["ann"])
    page = client.post("/api/tokens/", {"name": "", "scopes": [], "expires_in_days": "30"})
    assert page.status_code == 400
    text = page.content.decode()
    assert "This field is required." not in text
    assert "Give the token a name" in text and "Choose at least one scope" in text
    assert not AccessToken.objects.exists()
    # Only the scope missing: the page names that field, and keeps what was typed.
    page = client.post("/api/tokens/", {"name": "Wiki sync", "scopes": [], "expires_in_days": "365"})
    text = page.content.decode()
    assert page.status_code == 400 and "Give the token a name" not in text
    assert re.search(r'<a href="#id_scopes_0">Scopes</a>: Choose at least one scope', text)
    assert 'value="Wiki sync"' in text and re.search(r'<option value="365" selected>', text)
    assert not AccessToken.objects.exists()


def test_revoke_own_token_and_admins_revoke_any_of_their_tenant_only(people):
    ann = token_create(user=people["ann"], name="Ann's", scopes=ALL, expires_in_days=None)
    bob = token_create(user=people["bob"], name="Bob's", scopes=ALL, expires_in_days=None)
    tess = token_create(user=people["tess"], name="Tess's", scopes=ALL, expires_in_days=None)
    # Bob may not revoke Ann's (404, as for a token that does not exist); nothing changes.
    assert signed_in(people["bob"]).post(f"/api/tokens/{ann.token.pk}/revoke/").status_code == 404
    assert signed_in(people["bob"]).post("/api/tokens/999999/revoke/").status_code == 404
    assert bearer(ann.secret).get("/api/v1/sessions").status_code == 200
    # Ann revokes her own: the next call is a 401.
    assert signed_in(people["ann"]).post(f"/api/tokens/{ann.token.pk}/revoke/").status_code == 302
    assert_error_shape(bearer(ann.secret).get("/api/v1/sessions"), 401, "unauthorized")
    # Admins list their tenant's tokens and revoke any of them, not another tenant's.
    root = signed_in(people["root"])
    listing = root.get("/api/tokens/all/").content.decode()
    assert "Bob&#x27;s" in listing and "Ann&#x27;s" in listing and "Tess" not in listing
    assert signed_in(people["bob"]).get("/api/tokens/all/").status_code == 404
    assert root.post(f"/api/tokens/{tess.token.pk}/revoke/").status_code == 404
    assert root.post(f"/api/tokens/{bob.token.pk}/revoke/", {"next": "admin"})["Location"] == "/api/tokens/all/"
    assert_error_shape(bearer(bob.secret).get("/api/v1/sessions"), 401, "unauthorized")
    assert bearer(tess.secret).get("/api/v1/sessions").status_code == 200
    revoked = AuditEvent.objects.filter(action=AuditEvent.Action.TOKEN_REVOKED).order_by("id")
    assert [(e.actor.username, e.subject.username) for e in revoked] == [("ann", "ann"), ("root", "bob")]
    assert signed_in(people["troot"]).post(f"/api/tokens/{tess.token.pk}/revoke/").status_code == 302


def test_expired_tokens_inactive_people_and_forged_secrets_are_401(people):
    made = token_create(user=people["ann"], name="short", scopes=ALL, expires_in_days=1)
    assert bearer(made.secret).get("/api/v1/sessions").status_code == 200
    AccessToken.objects.filter(pk=made.token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert_error_shape(bearer(made.secret).get("/api/v1/sessions"), 401, "unauthorized")
    other = token_create(user=people["bob"], name="b", scopes=ALL, expires_in_days=None)
    forged = other.secret[:-4] + ("AAAA" if not other.secret.endswith("AAAA") else "BBBB")
    assert_error_shape(bearer(forged).get("/api/v1/sessions"), 401, "unauthorized")
    assert_error_shape(Client().get("/api/v1/sessions"), 401, "unauthorized")
    assert_error_shape(bearer("not-a-token").get("/api/v1/sessions"), 401, "unauthorized")
    people["bob"].is_active = False
    people["bob"].save()
    assert_error_shape(bearer(other.secret).get("/api/v1/sessions"), 401, "unauthorized")


def test_scopes_narrow_what_a_token_may_do(people, rag_runtime):
    read_only = bearer(token_create(user=people["ann"], name="r", scopes=["read"], expires_in_days=None).secret)
    assert read_only.get("/api/v1/documents").status_code == 200
    body = assert_error_shape(
        read_only.post("/api/v1/chat", {"question": "How many vacation days?"}, content_type="application/json"),
        403,
        "scope_missing",
    )
    assert "chat" in body["message"]
    assert_error_shape(read_only.get("/api/v1/questions"), 403, "scope_missing")
    assert_error_shape(read_only.delete("/api/v1/documents/00000000-0000-4000-8000-000000000000"), 403, "scope_missing")
    chat_only = bearer(token_create(user=people["ann"], name="c", scopes=["chat"], expires_in_days=None).secret)
    assert_error_shape(chat_only.get("/api/v1/search", {"q": "vacation days"}), 403, "scope_missing")
    # Every scope still reaches no more than its person: Ann owns no tag, so she cannot upload.
    everything = bearer(token_create(user=people["ann"], name="all", scopes=ALL, expires_in_days=None).secret)
    upload = SimpleUploadedFile("notes.txt", b"Some notes about the plan.", content_type="text/plain")
    assert_error_shape(everything.post("/api/v1/documents", {"tags": "public", "files": upload}), 404, "not_found")


def test_validation_errors_have_the_one_shape(people, rag_runtime, settings):
    client = bearer(token_create(user=people["ann"], name="v", scopes=ALL, expires_in_days=None).secret)
    short = assert_error_shape(
        client.post("/api/v1/chat", {"question": "a"}, content_type="application/json"), 422, "question_too_short"
    )
    assert "at least 3 characters" in short["message"]
    long = "x" * (settings.RAG.question_max_chars + 1)
    assert_error_shape(
        client.post("/api/v1/chat", {"question": long}, content_type="application/json"), 422, "question_too_long"
    )
    model = assert_error_shape(
        client.post("/api/v1/chat", {"question": "Hello there", "model": "gpt-9"}, content_type="application/json"),
        422,
        "unknown_model",
    )
    assert model["message"] == "Requested model not available." and "llama3.2" in model["details"]["allowed"]
    missing = assert_error_shape(
        client.post("/api/v1/chat", {}, content_type="application/json"), 422, "validation_error"
    )
    assert "question" in missing["message"]
    assert_error_shape(client.get("/api/v1/search", {"q": "vacation", "k": 999}), 422, "validation_error")
    # Absent and forbidden look alike.
    assert_error_shape(client.get("/api/v1/sessions/not-a-uuid"), 404, "not_found")
    assert_error_shape(client.get("/api/v1/documents/00000000-0000-4000-8000-000000000000"), 404, "not_found")
    assert not AccessToken.objects.filter(user=people["bob"]).exists()


@pytest.mark.parametrize("debug", [False, True], ids=["deployed", "make-run"])
def test_unknown_addresses_and_wrong_methods_have_the_one_shape(people, settings, debug):
    """An address under /api/v1/ that is no operation is the API's JSON 404, with or without a token
    and with DEBUG on (`make run`) or off; a known one called with the wrong method is a JSON 405
    that names the methods it takes. The web pages keep their HTML 404."""
    settings.DEBUG = debug
    token = bearer(token_create(user=people["ann"], name="x", scopes=ALL, expires_in_days=None).secret)
    for client in (token, Client()):
        for path in ("/api/v1/no-such-thing", "/api/v1/documents/a/b/c", "/api/v1/search/", "/api/v1/v2/chat"):
            body = assert_error_shape(client.get(path), 404, "not_found")
            assert body["message"] == "There is no API operation at this address: see /api/v1/docs."
        assert_error_shape(client.post("/api/v1/no-such-thing", {}), 404, "not_found")
        refused = client.delete("/api/v1/search")
        body = assert_error_shape(refused, 405, "method_not_allowed")
        assert refused["Allow"] == "GET" and body["message"] == "DELETE is not allowed here: use GET."
        refused = client.get("/api/v1/chat")
        assert_error_shape(refused, 405, "method_not_allowed")
        assert refused["Allow"] == "POST"
    # A real operation's own 404 keeps its message.
    absent = token.get("/api/v1/documents/00000000-0000-4000-8000-000000000000")
    assert assert_error_shape(absent, 404, "not_found")["message"] != "There is no API operation at this address."
    for path in ("/no/such/page/", "/api/tokens/no-such-page/", "/api/v1x/search"):
        page = signed_in(people["ann"]).get(path)
        assert page.status_code == 404 and page["Content-Type"].startswith("text/html"), path
    assert Client().get("/api/v1")["Location"] == "/api/v1/"  # the API's root, as before
    settings.RAGCHAT_API_RATE = "3/m"
    first = bearer(token_create(user=people["ann"], name="one", scopes=ALL, expires_in_days=None).secret)
    second = bearer(token_create(user=people["ann"], name="two", scopes=ALL, expires_in_days=None).secret)
    assert [first.get("/api/v1/sessions").status_code for _ in range(3)] == [200, 200, 200]
    limited = first.get("/api/v1/sessions")
    body = assert_error_shape(limited, 429, "rate_limited")
    assert 1 <= int(limited["Retry-After"]) <= 60 and "3/m" in body["message"]
    assert second.get("/api/v1/sessions").status_code == 200  # the limit is the token's, not the person's


@pytest.mark.django_db(transaction=True)  # the turn's thread must see the committed token (PostgreSQL)
def test_chat_has_its_own_tighter_limit(people, rag_runtime, settings):
    settings.RAGCHAT_API_CHAT_RATE = "1/m"
    client = bearer(token_create(user=people["ann"], name="c", scopes=ALL, expires_in_days=None).secret)
    assert client.post("/api/v1/chat", {"question": "Hello there"}, content_type="application/json").status_code == 200
    limited = client.post("/api/v1/chat", {"question": "Hello again"}, content_type="application/json")
    assert_error_shape(limited, 429, "rate_limited")
    assert int(limited["Retry-After"]) >= 1
    assert client.get("/api/v1/sessions").status_code == 200  # other calls go on


def test_upload_refusals_are_the_web_pages_messages(people, settings):
    """Too large and empty files, and a tag the person may not upload to: the API refuses them with
    the very sentences the documents page shows, and stores nothing."""
    from documents.models import Document
    from documents.services import tag_create, tag_ensure_public

    settings.RAGCHAT_MAX_UPLOAD_BYTES = 64
    tag_ensure_public(tenant_id="default")
    tag_create(tenant_id="default", name="Plans", slug="plans", owner=people["ann"])

    def files():
        return [
            SimpleUploadedFile("big.txt", b"x" * 65, content_type="text/plain"),
            SimpleUploadedFile("empty.txt", b"", content_type="text/plain"),
        ]

    api = bearer(token_create(user=people["ann"], name="u", scopes=ALL, expires_in_days=None).secret)
    web = signed_in(people["ann"])
    plans = str(Document.tags.field.related_model.objects.get(slug="plans").pk)
    body = assert_error_shape(
        api.post("/api/v1/documents", {"tags": ["plans"], "files": files()}), 422, "upload_refused"
    )
    page = web.post("/documents/upload", {"tags": [plans], "files": files()}, follow=True)
    shown = [str(m) for m in page.context["messages"]]
    assert body["details"] == shown and shown, (body, shown)
    assert shown[0].startswith("big.txt: this file is") and "the limit is" in shown[0]
    assert shown[1] == "empty.txt: this file is empty."
    # A tag the caller may not upload to: the page's sentence, as a 403 naming the tag.
    body = assert_error_shape(
        api.post("/api/v1/documents", {"tags": ["public"], "files": files()}), 403, "tag_not_allowed"
    )
    page = web.post("/documents/upload", {"tags": ["public-is-not-a-choice"], "files": files()}, follow=True)
    assert (
        [body["message"]]
        == [str(m) for m in page.context["messages"]]
        == ["You may not upload to one of the chosen tags."]
    )
    assert body["details"] == ["public"]
    assert not Document.objects.exists()


@pytest.mark.filterwarnings("ignore:Failed to obtain server version")  # qdrant-client, dead server
@pytest.mark.django_db(transaction=True)  # the chat turn's thread reads the committed token
def test_search_index_down_is_a_503_for_search_and_chat(people, rag_runtime, settings):
    from dataclasses import replace

    from chat import turns
    from documents.services import tag_ensure_public
    from ragchat import runtime
    from tests.ops.conftest import dead_port

    tag_ensure_public(tenant_id="default")
    settings.RAG = replace(rag_runtime, qdrant_url=f"http://127.0.0.1:{dead_port()}", rag_retry_attempts=1)
    runtime.reset()
    client = bearer(token_create(user=people["ann"], name="s", scopes=ALL, expires_in_days=None).secret)
    search = assert_error_shape(client.get("/api/v1/search", {"q": "vacation days"}), 503, "search_unavailable")
    assert search["message"] == turns.MSG_SEARCH
    asked = client.post("/api/v1/chat", {"question": "How many vacation days?"}, content_type="application/json")
    body = assert_error_shape(asked, 503, "search_unavailable")
    assert body["message"] == turns.MSG_SEARCH and body["details"]["session_id"]


def test_failed_turns_map_to_the_error_classes():
    """A stored failure's class (subclasses included) gives the API's status and code."""
    from api.endpoints import failure_class

    assert failure_class("LLMTimeoutError") == (504, "upstream_timeout")
    assert failure_class("ContextError") == failure_class("VectorStoreError") == (503, "search_unavailable")
    assert failure_class("CollectionMismatchError") == failure_class("EmbeddingError") == (503, "search_unavailable")
    assert failure_class("ModelUnavailableError") == failure_class("ModelNotAllowedError") == (422, "unknown_model")
    assert failure_class("LLMConnectionError") == failure_class("LLMResponseError") == (502, "upstream_unavailable")
    assert failure_class("") == failure_class("RuntimeError") == (502, "upstream_unavailable")
