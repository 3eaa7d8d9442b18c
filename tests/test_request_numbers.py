"""Numbers from a request that reach a query (ragchat.bounds): one beyond the database's integers,
or digits int() cannot read, is refused with a sentence (4xx), never a server error: the API's
query, path and form values, the web upload form, the admin's list lookups and forms, URL ids and
the chat socket's message ids. Runs on SQLite and, with DATABASE_URL, on PostgreSQL."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.converters import IntConverter

from api.services import token_create
from chat.models import ChatSession
from documents.models import Document, Tag
from documents.services import tag_create
from ragchat.bounds import ID_MAX, IdConverter, request_int

HUGE = "1444315045905042505728"  # the page number of the issue: beyond bigint
JUST_OVER = str(ID_MAX + 1)


@pytest.fixture
def people(django_user_model):
    mk = django_user_model.objects.create_user
    ann = mk("ann", password="pw-ann-12345", first_name="Ann")
    root = mk("root", password="pw-root-12345", is_superuser=True, is_staff=True)
    tag_create(tenant_id="default", name="Alpha", slug="alpha", owner=ann)
    return {"ann": ann, "root": root}


def _api(user) -> Client:
    secret = token_create(user=user, name="t", scopes=["read", "chat", "upload", "answer"], expires_in_days=1).secret
    return Client(HTTP_AUTHORIZATION=f"Bearer {secret}", raise_request_exception=False)


def _signed_in(user) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def _refusal(response, status: int, code: str) -> str:
    assert response.status_code == status, response.content[:500]
    body = response.json()
    assert body["code"] == code, body
    assert body["message"].strip().endswith("."), body  # a sentence
    return body["message"]


@pytest.mark.django_db
@pytest.mark.parametrize("page", [HUGE, JUST_OVER, str(2**31)])
def test_a_page_number_beyond_the_databases_integers_is_a_422(people, page):
    message = _refusal(_api(people["ann"]).get(f"/api/v1/documents?page={page}&page_size=24"), 422, "validation_error")
    assert message.startswith("page: ")


@pytest.mark.django_db
@pytest.mark.parametrize("tag", [HUGE, JUST_OVER, "²"])
def test_a_tag_given_as_a_huge_number_is_refused_as_any_tag_not_yours(people, tag):
    upload = SimpleUploadedFile("notes.txt", b"Notes on the quarterly plan.", content_type="text/plain")
    response = _api(people["ann"]).post("/api/v1/documents", {"files": [upload], "tags": [tag]})
    assert _refusal(response, 403, "tag_not_allowed") == "You may not upload to one of the chosen tags."
    assert response.json()["details"] == [tag]
    assert not Document.objects.exists()


@pytest.mark.django_db
def test_a_tags_id_is_not_a_slug_in_the_api(people):
    """A tag's database id is no name for it in the API: only slugs are."""
    alpha = str(Tag.objects.get(slug="alpha").pk)
    upload = SimpleUploadedFile("notes.txt", b"Notes on the quarterly plan.", content_type="text/plain")
    _refusal(
        _api(people["ann"]).post("/api/v1/documents", {"files": [upload], "tags": [alpha]}), 403, "tag_not_allowed"
    )


@pytest.mark.django_db
@pytest.mark.parametrize("question_id", [HUGE, JUST_OVER])
def test_a_routed_question_id_beyond_bigint_is_a_422(people, question_id):
    response = _api(people["ann"]).post(
        f"/api/v1/questions/{question_id}/answer", {"answer": "Five days."}, content_type="application/json"
    )
    assert _refusal(response, 422, "validation_error").startswith("question_id: ")


@pytest.mark.django_db
@pytest.mark.parametrize("tag", [HUGE, JUST_OVER])
def test_the_upload_page_refuses_a_huge_tag_id_with_its_message(people, tag):
    upload = SimpleUploadedFile("notes.txt", b"Notes on the quarterly plan.", content_type="text/plain")
    page = _signed_in(people["ann"]).post("/documents/upload", {"files": [upload], "tags": [tag]}, follow=True)
    assert page.status_code == 200
    assert "You may not upload to one of the chosen tags." in [str(m) for m in page.context["messages"]]
    assert not Document.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "changelist", ["documents/tag", "documents/document", "ragchat/user", "routing/routedquestion", "access/auditevent"]
)
@pytest.mark.parametrize("lookup", [f"id__in={HUGE}", f"id__in=1,{JUST_OVER}", f"pk__in={HUGE}"])
def test_admin_lists_refuse_out_of_range_lookups_as_any_bad_lookup(people, changelist, lookup):
    admin = _signed_in(people["root"])
    response = admin.get(f"/admin/{changelist}/?{lookup}")
    # Django's answer to a lookup it cannot run: back to the list with ?e=1, which says so.
    assert response.status_code == 302 and response["Location"].endswith("?e=1"), response.status_code
    if changelist != "documents/document":  # ids that are numbers: in range, the list
        assert admin.get(f"/admin/{changelist}/?id__in=1,2").status_code == 200


@pytest.mark.django_db
def test_an_admin_form_refuses_a_huge_member_id(people):
    alpha = Tag.objects.get(slug="alpha")
    admin = _signed_in(people["root"])
    for owner, members in ((people["ann"].pk, [HUGE]), (HUGE, [people["ann"].pk]), (JUST_OVER, [JUST_OVER])):
        page = admin.post(
            f"/admin/documents/tag/{alpha.pk}/change/",
            {"name": "Alpha", "slug": "alpha", "owner": owner, "members": members, "tenant_id": "default"},
        )
        assert page.status_code == 200, page.status_code
        assert "is not a valid value" in page.content.decode() or "Select a valid choice" in page.content.decode()
    assert not alpha.members.exists()


def _patterns(patterns, prefix=""):
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from _patterns(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            yield prefix + str(p.pattern), p


def test_no_url_takes_djangos_unbounded_int():
    """Every id in a URL is an `<id:…>` (IdConverter); Django's `int` takes any number of digits."""
    unbounded = [
        route
        for route, p in _patterns(get_resolver().url_patterns)
        if any(isinstance(c, IntConverter) for c in getattr(p.pattern, "converters", {}).values())
    ]
    assert not unbounded
    ids = [route for route, p in _patterns(get_resolver().url_patterns) if "<id:" in route]
    assert len(ids) >= 14, ids


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    [
        "/routing/q/{n}/",
        "/routing/knowledge/{n}/",
        "/routing/feedback/{n}/",
        "/routing/escalate/{n}/",
        "/documents/sites/{n}/",
        "/api/tokens/{n}/revoke/",
    ],
)
def test_a_huge_id_in_a_url_is_no_address(people, path):
    client = _signed_in(people["root"])
    for n in (HUGE, JUST_OVER):
        assert client.get(path.format(n=n)).status_code == 404
        assert client.post(path.format(n=n)).status_code == 404


@pytest.mark.django_db
def test_publishing_under_a_tag_named_by_unreadable_digits_is_a_404(people):
    """`"²".isdigit()` is true but int("²") fails: the publish form's tag is read by request_int."""
    from routing.models import RoutedQuestion

    session = ChatSession.objects.create(owner=people["ann"])
    question = RoutedQuestion.objects.create(
        question="How many days carry over?", asker=people["ann"], session=session, tenant_id="default"
    )
    response = _signed_in(people["root"]).post(f"/routing/q/{question.pk}/publish/", {"publish_tag": "²"})
    assert response.status_code == 404


def test_request_int_and_the_converter_take_the_id_range_only():
    assert request_int("42") == 42 and request_int(ID_MAX) == ID_MAX
    for raw in ("²", "١٢", "-1", "4 2", "", JUST_OVER, HUGE, None):
        assert request_int(raw) is None, raw
    assert request_int("0", minimum=1) is None
    converter = IdConverter()
    assert converter.to_python(str(ID_MAX)) == ID_MAX
    with pytest.raises(ValueError):
        converter.to_python(JUST_OVER)


@pytest.mark.django_db(transaction=True)
async def test_the_chat_socket_ignores_message_ids_it_cannot_read(django_user_model):
    from tests.chat.conftest import open_tab

    user = await sync_to_async(django_user_model.objects.create_user)("alice", password="pw-alice-123")
    session = await sync_to_async(ChatSession.objects.create)(owner=user)
    tab = await open_tab(user, session.pk, query=f"sync={HUGE}")
    assert await tab.connect()
    for message in (
        {"retry": "²"},
        {"retry": HUGE},
        {"regenerate": "²"},
        {"stop": True, "answer": "²"},
        {"stop": True, "answer": HUGE},
    ):
        await tab.comm.send_to(text_data=json.dumps(message))
    # Still open and answering: an edit of a message it cannot read is refused with its note.
    await tab.comm.send_to(text_data=json.dumps({"edit": "²", "question": "What carries over?"}))
    assert "refused" in await tab.receive(timeout=10)
    await tab.comm.send_to(text_data=json.dumps({"edit": JUST_OVER, "question": "What carries over?"}))
    assert "refused" in await tab.receive(timeout=10)
    await tab.close()
