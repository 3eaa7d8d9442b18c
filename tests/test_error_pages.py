"""The error pages people meet, with DEBUG off as in production (pytest-django's default; see
tests/settings.py): the app's own layout, a sentence saying what happened and a way back, never
Django's plain or debug pages. A 404 for what is not yours is the 404 for what does not exist."""

from __future__ import annotations

import re
import uuid

import pytest
from django.conf import settings
from django.core.exceptions import BadRequest, PermissionDenied
from django.template.loader import render_to_string
from django.test import Client
from django.urls import path, reverse

from chat.models import ChatSession, Message
from ragchat import urls as project_urls

pytestmark = pytest.mark.django_db

NOT_FOUND = "There is nothing to show at this address."
FORBIDDEN = "Your account does not have permission for this page or action."
# The expired-form sentence (templates/_form_expired.html): said on the page whose form expired
# (an htmx action's message) and, on the page that replaces it, of the page the form was on.
EXPIRED = (
    "This page was open too long, or you signed in again in another tab, so its form expired and nothing was sent."
)
EXPIRED_PAGE = (
    "The page you came from was open too long, or you signed in again in another tab, so its form expired and "
    "nothing was sent. Open it again and try once more."
)
NOT_UNDERSTOOD = (
    "Your browser sent a request the server could not understand, so nothing was changed. Go back and try again; "
    "if it keeps happening, tell your administrator."
)
BROKEN = "The server ran into a problem and could not finish this request."
# What Django's own pages (plain or debug) say, none of which a person may see.
DJANGO_TEXT = (
    "Page not found at",
    "Using the URLconf",
    "DEBUG = True",
    "Traceback",
    "<h1>Not Found</h1>",
    "<h1>Server Error (500)</h1>",
    "<h1>403 Forbidden</h1>",
    "CSRF verification failed",
    "Request aborted",
    "No such",  # the views' Http404 messages stay in the server
)


def _boom(request):
    raise RuntimeError("a bug")


def _forbidden(request):
    raise PermissionDenied


def _bad_request(request):
    raise BadRequest("a malformed request")


# The URLconf of the tests marked urls(__name__): the project's, plus a page that fails and one that
# refuses (the product raises PermissionDenied only in corners of the admin that admins never reach).
urlpatterns = [
    path("test-boom/", _boom),
    path("test-forbidden/", _forbidden),
    path("test-bad-request/", _bad_request),
    *project_urls.urlpatterns,
]


def product_page(response, status: int, sentence: str) -> str:
    """The page's HTML, once checked to be the app's own page for `status`, saying `sentence`."""
    page = response.content.decode()
    assert response.status_code == status
    assert response["Content-Type"].startswith("text/html")
    assert page.lstrip().lower().startswith("<!doctype html>")
    assert 'class="topbar"' in page and "css/app.css" in page and 'class="card error-card"' in page
    assert sentence in page
    assert not [text for text in DJANGO_TEXT if text in page], page
    return page


def main_of(page: str) -> str:
    return re.search(r"<main\b.*?</main>", page, re.DOTALL).group(0)


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="pw-alice-123")


@pytest.fixture
def mallory(django_user_model):
    return django_user_model.objects.create_user(username="mallory", password="pw-mallory-123")


@pytest.fixture
def answer(alice):
    session = ChatSession.objects.create(owner=alice, title="Alice's chat")
    question = Message.objects.create(session=session, role="user", content="How many vacation days?")
    return Message.objects.create(session=session, role="assistant", content="Thirty.", reply_to=question)


def test_someone_elses_chat_looks_like_a_missing_one(client, mallory, answer):
    client.force_login(mallory)
    theirs = product_page(client.get(reverse("chat:session", args=[answer.session_id])), 404, NOT_FOUND)
    missing = product_page(client.get(reverse("chat:session", args=[uuid.uuid4()])), 404, NOT_FOUND)
    assert main_of(theirs) == main_of(missing)
    assert "<title>Page not found · ragchat</title>" in theirs and "Alice" not in theirs
    # Signed in: the top bar as on every page, and the way back to one's own chats.
    assert (
        'aria-label="Main"' in theirs
        and f'<a class="btn btn-primary" href="{reverse("home")}">Back to your chats</a>' in theirs
    )


def test_someone_elses_answer_looks_like_a_missing_one(client, mallory, answer):
    """The answer's forms posted without script: "Ask the owner" and the vote on an answer that is
    not the poster's, or on none, end on the same 404 page; nothing is recorded."""
    client.force_login(mallory)
    pages = [
        product_page(client.post(reverse(name, args=[message_id]), {"vote": "1"}), 404, NOT_FOUND)
        for name in ("routing:escalate", "routing:feedback")
        for message_id in (answer.pk, answer.pk + 1000)
    ]
    assert len({main_of(page) for page in pages}) == 1
    assert not answer.feedback.exists() and not answer.session.messages.filter(role="owner").exists()


def test_an_address_that_does_not_exist_offers_sign_in_to_a_stranger(client):
    page = product_page(client.get("/no/such/page/"), 404, NOT_FOUND)
    assert f'<a class="btn btn-primary" href="{reverse("login")}">Sign in</a>' in page
    assert 'aria-label="Main"' not in page  # no app links for someone not signed in


def test_a_form_with_a_stale_token_gets_the_expired_form_page(alice, answer):
    """A form posted with the token of an old page (here: its CSRF cookie was renewed since, as when
    signing in again) is refused with the product's page, and nothing changes."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    chat_page = client.get(reverse("chat:session", args=[answer.session_id])).content.decode()
    stale = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', chat_page).group(1)
    del client.cookies[settings.CSRF_COOKIE_NAME]
    client.get(reverse("home"))  # a new cookie, as signing in again in another tab gives
    rename = reverse("chat:rename", args=[answer.session_id])
    chat_url = reverse("chat:session", args=[answer.session_id])
    response = client.post(
        rename, {"title": "x", "csrfmiddlewaretoken": stale}, HTTP_REFERER=f"http://testserver{chat_url}"
    )
    page = product_page(response, 403, EXPIRED_PAGE)
    assert "<title>The form expired · ragchat</title>" in page
    assert "This page was open too long" not in page  # "this page" is the form's, not this one
    # One way on: the page the form was on, opened again (a new token); not the browser's Reload,
    # which would send the same form again.
    assert main_of(page).count('class="btn') == 1
    assert f'<a class="btn btn-primary" href="{chat_url}">Open the page again</a>' in page
    assert ChatSession.objects.get(pk=answer.session_id).title == "Alice's chat"
    # No Referer, or another site's: the way back to one's chats instead.
    for referer in (
        {},
        {"HTTP_REFERER": "https://evil.example/phish"},
        {"HTTP_REFERER": "http://testserver//evil.example/"},
    ):
        page = product_page(
            client.post(rename, {"title": "x", "csrfmiddlewaretoken": stale}, **referer), 403, EXPIRED_PAGE
        )
        assert "Open the page again" not in page and "evil.example" not in page, referer
        assert f'<a class="btn btn-primary" href="{reverse("home")}">Back to your chats</a>' in page, referer

    # No token at all, from someone not signed in (the sign-in form of a page left open): the same page.
    page = product_page(
        Client(enforce_csrf_checks=True).post(reverse("login"), {"username": "alice"}), 403, EXPIRED_PAGE
    )
    assert f'href="{reverse("login")}">Sign in</a>' in page


def test_an_htmx_request_with_a_stale_token_gets_the_sentence_for_the_page_it_came_from(alice, answer):
    """htmx swaps no refused response, so the page would show nothing: the expired-form sentence comes
    as a fragment for the page's message area (#flash), with a link that reloads the page."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    chat_url = reverse("chat:session", args=[answer.session_id])
    chat_page = client.get(chat_url).content.decode()
    stale = re.search(r'"X-CSRFToken": "([^"]+)"', chat_page).group(1)
    assert '<div class="flash" id="flash"></div>' in chat_page  # there, and empty
    del client.cookies[settings.CSRF_COOKIE_NAME]
    client.get(reverse("home"))
    response = client.post(
        reverse("routing:feedback", args=[answer.pk]),
        {"vote": "1"},
        HTTP_X_CSRFTOKEN=stale,
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL=f"http://testserver{chat_url}",
    )
    assert response.status_code == 403
    assert response["HX-Retarget"] == "#flash" and response["HX-Reswap"] == "innerHTML"
    fragment = response.content.decode().strip()
    assert fragment.startswith('<p class="flash-error" role="alert">') and "<main" not in fragment
    assert EXPIRED in fragment and f'<a href="{chat_url}">Reload the page</a> and try again.' in fragment
    assert not answer.feedback.exists()
    # A current URL of another site is not linked to.
    response = client.post(
        reverse("routing:feedback", args=[answer.pk]),
        {"vote": "1"},
        HTTP_X_CSRFTOKEN=stale,
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL="https://evil.example/phish",
    )
    assert f'<a href="{reverse("home")}">Reload the page</a>' in response.content.decode()


@pytest.mark.urls(__name__)
def test_a_request_the_server_cannot_understand_gets_the_400_page(client, alice):
    page = product_page(client.get("/test-bad-request/"), 400, NOT_UNDERSTOOD)
    assert "<title>Request not understood · ragchat</title>" in page and "a malformed request" not in page
    assert f'<a class="btn btn-primary" href="{reverse("login")}">Sign in</a>' in page
    client.force_login(alice)
    page = product_page(client.get("/test-bad-request/"), 400, NOT_UNDERSTOOD)
    assert f'<a class="btn btn-primary" href="{reverse("home")}">Back to your chats</a>' in page


@pytest.mark.urls(__name__)
def test_a_refusal_gets_the_no_access_page(client, alice):
    client.force_login(alice)
    page = product_page(client.get("/test-forbidden/"), 403, FORBIDDEN)
    assert "<title>No access · ragchat</title>" in page and "Back to your chats" in page


def test_the_500_page_renders_with_an_empty_context_and_no_query(django_assert_num_queries):
    """Django renders 500.html with nothing: no request, no user, no context processors, perhaps
    because the database is what failed."""
    with django_assert_num_queries(0):
        page = render_to_string("500.html")
    assert BROKEN in page and 'class="topbar"' in page and "css/app.css" in page
    assert f'<a class="btn btn-primary" href="{reverse("home")}">Go to the home page</a>' in page
    assert 'aria-label="Main"' not in page


@pytest.mark.urls(__name__)
def test_an_unexpected_error_gets_the_500_page():
    assert not settings.DEBUG
    client = Client(raise_request_exception=False)
    page = product_page(client.get("/test-boom/"), 500, BROKEN)
    assert "a bug" not in page and "RuntimeError" not in page
