"""Security pass (issue 6): deploy checks, CSRF on every POST, websocket origin and auth on every ws
route, anonymous access to every URL, XSS payloads rendered inert everywhere they are shown, and no
remote image loaded from an answer's Markdown."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from html.parser import HTMLParser
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.test import Client
from django.urls import NoReverseMatch, URLPattern, URLResolver, get_resolver, reverse

from chat import services as chat_services
from chat import turns
from chat.models import ChatSession, Message
from documents.models import Document
from routing.models import RoutedQuestion
from tests.chat.conftest import open_tab, session_cookie

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "<script>alert(1)</script>"
IMG = '<img src=x onerror="alert(2)">'
PAYLOAD = f"{SCRIPT} {IMG}"
SCRIPT_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


# The product's own inline SVG (the vote buttons' icons in templates/chat/_feedback.html, the bell in
# routing/_bell.html, the Menu button in _base.html): decorative and hidden from screen readers; the
# pin mark of chat/_session_list.html is an image named "Pinned". None is made of document or user text.
OUR_ICON_CLASSES = {"fb-icon", "bell-icon", "menu-icon"}
OUR_NAMED_ICONS = {"pin-mark": "Pinned"}


def _our_icon(tag: str, attrs: dict) -> bool:
    if tag != "svg":
        return False
    if attrs.get("class") in OUR_NAMED_ICONS:
        return attrs.get("role") == "img" and attrs.get("aria-label") == OUR_NAMED_ICONS[attrs["class"]]
    return attrs.get("class") in OUR_ICON_CLASSES and attrs.get("aria-hidden") == "true"


class _LiveElements(HTMLParser):
    """What a browser would run or load from the page: scripts with the payload, event-handler
    attributes with it, javascript: links, images and other embedded content."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self._in_script = tag == "script"
        for name, value in attrs:
            if name.startswith("on") and "alert(" in (value or ""):
                self.found.append(f"<{tag} {name}={value!r}>")
            if name in ("href", "src", "action") and (value or "").strip().lower().startswith("javascript:"):
                self.found.append(f"<{tag} {name}={value!r}>")
        if tag in ("img", "iframe", "object", "embed", "svg") and not _our_icon(tag, dict(attrs)):
            self.found.append(f"<{tag} {dict(attrs)}>")

    def handle_data(self, data):
        if self._in_script and "alert(" in data:
            self.found.append(f"<script>{data}")

    def handle_endtag(self, tag):
        self._in_script = False


def assert_inert(html: str, *, shown: bool = True) -> None:
    parser = _LiveElements()
    parser.feed(html)
    assert parser.found == []
    assert "<script>alert" not in html
    if shown:
        assert SCRIPT_ESCAPED in html


# ----------------------------------------------------------------------------------- deploy checks


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    # Only what docs/deploying.md's production recipe sets: nothing of the test suite's plain-HTTP settings.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "QDRANT_URL") and not k.startswith("DJANGO_SECURE_")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="ragchat.settings",
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY="k" + uuid.uuid4().hex + uuid.uuid4().hex + "-Zq9!x",
        DJANGO_ALLOWED_HOSTS="chat.example.com",
        DJANGO_CSRF_TRUSTED_ORIGINS="https://chat.example.com",
        RAGCHAT_DATA_DIR=str(tmp_path),
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_production_settings_refuse_to_start_without_a_secret(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SECRET_KEY"}
    env.update(DJANGO_SETTINGS_MODULE="ragchat.settings", DJANGO_DEBUG="false", RAGCHAT_DATA_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode != 0 and "DJANGO_SECRET_KEY" in done.stderr


# ---------------------------------------------------------------------------------- URL walking


@pytest.fixture
def world(people, tags):
    """One object of each kind, owned by someone, so every URL with an id resolves to a real row."""
    owner, member = people["owner"], people["member"]
    session = ChatSession.objects.create(owner=member, title="Mine")
    question = Message.objects.create(session=session, role="user", content="How do refunds work?")
    answer = Message.objects.create(
        session=session, role="assistant", content="Not sure.", reply_to=question, query_strategy="first question"
    )
    document = Document.objects.create(
        title="Plan",
        original_filename="plan.txt",
        file="originals/default/x.txt",
        content_hash=uuid.uuid4().hex,
        status="failed",
        uploaded_by=owner,
    )
    document.tags.set([tags["finance"]])
    routed = RoutedQuestion.objects.create(
        asker=member,
        session=session,
        message=answer,
        question_message=question,
        tag=tags["finance"],
        target=owner,
        question="How do refunds work?",
    )
    return {"session": session, "message": answer, "document": document, "routed": routed, **people}


def _patterns(resolver: URLResolver, prefix: str = "", namespace: str = ""):
    for item in resolver.url_patterns:
        if isinstance(item, URLResolver):
            ns = f"{namespace}{item.namespace}:" if item.namespace else namespace
            yield from _patterns(item, prefix + str(item.pattern), ns)
        elif isinstance(item, URLPattern) and item.name:
            yield namespace + item.name, item


def _value(name: str, world) -> list:
    ids = {
        "session_id": world["session"].pk,
        "document_id": world["document"].pk,
        "question_id": world["routed"].pk,
        "message_id": world["message"].pk,
        "object_id": world["owner"].pk,
        "user_id": world["owner"].pk,
    }
    return [ids[name]] if name in ids else ["1", "ragchat", "chat", "x"]


def every_url(world) -> list[str]:
    """A concrete path for every named URL (admin included), with ids of real rows."""
    urls = set()
    for name, pattern in _patterns(get_resolver()):
        params = list(pattern.pattern.regex.groupindex)
        if not params:
            try:
                urls.add(reverse(name))
            except NoReverseMatch:
                pass
            continue
        candidates = [_value(p, world) for p in params]
        for attempt in range(max(len(c) for c in candidates)):
            kwargs = {p: c[min(attempt, len(c) - 1)] for p, c in zip(params, candidates)}
            try:
                urls.add(reverse(name, kwargs=kwargs))
                break
            except NoReverseMatch:
                continue
    return sorted(urls)


# /admin/logout/ only redirects an anonymous visitor to the admin's login.
# The API's schema and docs page describe operations, not data; its health answers anyone like
# /health (details for admin tokens only).
PUBLIC = {
    "/accounts/login/",
    "/health",
    "/admin/login/",
    "/admin/logout/",
    "/api/v1/docs",
    "/api/v1/openapi.json",
    "/api/v1/health",
}


@pytest.mark.django_db
def test_every_url_refuses_anonymous_users(world):
    urls = every_url(world)
    assert len(urls) > 30 and "/documents/upload" in urls and f"/routing/q/{world['routed'].pk}/" in urls
    client = Client()
    for url in urls:
        for method in ("get", "post"):
            response = getattr(client, method)(url)
            if url in PUBLIC:
                continue
            location = response.headers.get("Location", "")
            # The JSON API (token-only) answers 401 with its own error shape.
            api_refused = url.startswith("/api/v1/") and response.status_code == 401
            refused = (
                api_refused
                or response.status_code in (403, 404, 405)
                or (response.status_code == 302 and ("/accounts/login/" in location or "/admin/login/" in location))
            )
            assert refused, (method, url, response.status_code, location)


@pytest.mark.django_db
def test_every_post_without_a_csrf_token_is_refused(world):
    """Signed in (as an admin, who may do anything), every URL refuses a POST without the token;
    the same POST with the token gets past the check (so the 403 is CSRF's, not something else)."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(world["admin"])
    urls = every_url(world)
    for url in urls:
        response = client.post(url, {"title": "x", "answer": "An answer."})
        if url.startswith("/api/v1/"):
            # The JSON API takes bearer tokens only: a session cookie grants nothing there, so
            # there is nothing for a forged cross-site POST to ride on.
            assert response.status_code in (401, 403, 405), (url, response.status_code)
            continue
        assert response.status_code == 403, (url, response.status_code)
        assert b"The form expired" in response.content, url  # templates/403_csrf.html, the CSRF refusal
    # The login form too, for an anonymous visitor.
    anonymous = Client(enforce_csrf_checks=True)
    assert anonymous.post("/accounts/login/", {"username": "root", "password": "pw-root-123"}).status_code == 403
    page = anonymous.get("/accounts/login/")
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.content).group(1).decode()
    signed_in = anonymous.post(
        "/accounts/login/", {"username": "root", "password": "pw-root-123", "csrfmiddlewaretoken": token}
    )
    assert signed_in.status_code == 302


# ---------------------------------------------------------------------------------- websockets


def _ws_routes(world) -> list[str]:
    return [f"/ws/chat/{world['session'].pk}/", "/ws/documents/", "/ws/inbox/", "/ws/nav/"]


async def _connects(path: str, *, user, origin: str) -> bool:
    from ragchat.asgi import application

    headers = [(b"origin", origin.encode()), (b"host", b"testserver")]
    if user is not None:
        cookie = await sync_to_async(session_cookie)(user)
        headers.append((b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={cookie}".encode()))
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await communicator.connect(timeout=5)
    await communicator.disconnect()
    return connected


@pytest.mark.django_db(transaction=True)
async def test_every_ws_route_refuses_foreign_origins_and_anonymous_users(world, rag_runtime):
    member = world["member"]
    routes = _ws_routes(world)
    from ragchat.ws_urls import websocket_urlpatterns

    assert len(routes) == len(websocket_urlpatterns)  # a new route must be added here
    for path in routes:
        assert await _connects(path, user=member, origin="http://testserver"), path  # the control
        for origin in ("https://evil.example", "http://testserver.evil.example", "null"):
            assert not await _connects(path, user=member, origin=origin), (path, origin)
        assert not await _connects(path, user=None, origin="http://testserver"), path


# ---------------------------------------------------------------------------------------- XSS


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("drain_turns")
async def test_xss_in_documents_questions_and_answers_is_inert_everywhere(people, tags, upload, fake_ollama):
    member, owner = people["member"], people["owner"]
    text = (
        f"Refunds {SCRIPT}\n\nRefund policy for travel refunds: {PAYLOAD} refunds are paid within "
        f"ten days of the refund request.\n"
    ).encode()
    document = await sync_to_async(upload)(text, f"{IMG}refunds.txt", tag_names=("finance",))
    assert document.status == "ready", document.error
    assert "<" not in document.original_filename  # safe_filename already defuses names
    session = await ChatSession.objects.acreate(owner=member)

    # Answer with the payload, a citation of the payload chunk, and a remote Markdown image.
    source = f"{document.id}:0"
    fake_ollama.reply(
        f"Refunds {PAYLOAD} are paid [SourceId: {source}]. ![pixel](https://evil.example/t.png) "
        f"<img src=https://evil.example/u.png> [link](javascript:alert(3))"
    )
    fake_ollama.rating(90)
    tab = await open_tab(member, session.pk)
    assert await tab.connect()
    await tab.ask(f"How are travel refunds paid? {PAYLOAD}")
    final = await tab.until_final()
    await turns.wait_idle()
    frames = "".join(tab.frames)
    await tab.close()
    assert_inert(frames)
    assert "<img" not in final and 'src="https://evil.example' not in final  # the image is not loaded
    assert 'href="javascript' not in final
    answer = await Message.objects.filter(session=session, role="assistant").afirst()
    assert answer.citations and answer.citations[0]["document_id"] == str(document.id)

    # The owner's answer (also routed-question text) with the payload.
    user_question = await Message.objects.filter(session=session, role="user").afirst()
    await sync_to_async(chat_services.message_create_owner_answer)(
        session=session,
        author=owner,
        content=f"Owner says {PAYLOAD} ![x](https://evil.example/o.png)",
        reply_to=user_question,
    )
    routed, _ = await RoutedQuestion.objects.aupdate_or_create(  # the turn may have routed it already
        message=answer,
        defaults=dict(
            asker=member,
            session=session,
            question_message=user_question,
            tag=tags["finance"],
            target=owner,
            question=user_question.content,
            draft=answer.content,
            answer=f"Owner says {PAYLOAD}",
            citations=answer.citations,
            status="answered",
            answered_by=owner,
        ),
    )
    pages = await sync_to_async(_pages)(member, owner, session, document, routed)
    for url, html in pages.items():
        assert_inert(html, shown=False)
        assert "evil.example" not in "".join(re.findall(r"<img[^>]*>", html)), url
    for url in (f"/chat/{session.pk}/", f"/routing/q/{routed.pk}/", f"/documents/{document.id}/"):
        assert SCRIPT_ESCAPED in pages[url], url


def _pages(member, owner, session, document, routed) -> dict[str, str]:
    as_member, as_owner = Client(), Client()
    as_member.force_login(member)
    as_owner.force_login(owner)
    pages = {}
    for client, url in [
        (as_member, f"/chat/{session.pk}/"),
        (as_member, "/"),
        (as_member, "/routing/mine/"),
        (as_owner, "/documents/"),
        (as_owner, f"/documents/{document.id}/"),
        (as_owner, f"/documents/{document.id}/row"),
        (as_owner, "/routing/inbox/"),
        (as_owner, f"/routing/q/{routed.pk}/"),
    ]:
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        pages[url] = response.content.decode()
    return pages


@pytest.mark.django_db
def test_an_uploaded_html_original_is_never_rendered_by_the_browser(people, upload):
    page = f"<html><head><title>Policy</title></head><body><p>Policy text.</p>{SCRIPT}</body></html>".encode()
    document = upload(page, "policy.html")
    client = Client()
    client.force_login(people["owner"])
    response = client.get(f"/documents/{document.id}/file")
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment")
    assert not response["Content-Type"].startswith("text/html")
    assert "sandbox" in response["Content-Security-Policy"] and response["X-Content-Type-Options"] == "nosniff"
