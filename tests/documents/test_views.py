"""Upload page, list with facets, retry/replace/delete, Django admin actions, the live-rows consumer."""

from __future__ import annotations

import re
import uuid

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from documents.consumers import DocumentProgressConsumer
from documents.models import Document
from documents.services import broadcast_document
from ragchat.evaluation.docgen import make_docx, make_png, make_text

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def _files(*items):
    return [SimpleUploadedFile(name, data) for name, data in items]


def test_upload_several_files_with_tags(client, people, tags, vectors, rag_runtime):
    client.force_login(people["owner"])
    page = client.get("/documents/").content.decode()
    assert 'name="files"' in page and "Finance" in page and f'value="{tags["hr"].pk}"' not in page
    existing = make_text(["Already here."])
    client.post("/documents/upload", {"files": _files(("first.txt", existing)), "tags": [tags["finance"].pk]}, **HTMX)
    response = client.post(
        "/documents/upload",
        {
            "files": _files(
                ("budget.txt", make_text(["The budget for 2027 is approved."])),
                ("plan.docx", make_docx([("Plan", ["Hire two engineers."])])),
                ("image.png", make_png()),
                ("again.txt", existing),
            ),
            "tags": [tags["finance"].pk],
        },
        **HTMX,
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert "2 files uploaded" in body
    assert "image.png: This file" in body and "not a supported document" in body
    assert "again.txt: this content already exists as" in body
    assert body.count('class="doc-row"') == 2
    ready = Document.objects.filter(status="ready")
    assert ready.count() == 3
    for document in ready:
        assert vectors.count(document_id=str(document.id)) == document.chunk_count > 0
        assert list(document.tags.values_list("slug", flat=True)) == ["finance"]


def test_upload_to_a_tag_not_owned_is_refused(client, people, tags, rag_runtime):
    client.force_login(people["owner"])
    response = client.post("/documents/upload", {"files": _files(("a.txt", b"hello")), "tags": [tags["hr"].pk]}, **HTMX)
    assert "tags" in response.content.decode() and Document.objects.count() == 0
    client.force_login(people["member"])
    assert (
        client.post(
            "/documents/upload", {"files": _files(("a.txt", b"hello")), "tags": [tags["finance"].pk]}
        ).status_code
        == 404
    )
    assert 'name="files"' not in client.get("/documents/").content.decode()


def test_list_filters_and_facets(client, people, upload):
    upload(make_text(["Finance one."]), "f1.txt")
    upload(make_text(["Finance two."]), "f2.txt")
    upload(make_text(["HR only."]), "hr.txt", tag_names=("hr",), user=people["admin"])
    client.force_login(people["admin"])
    page = client.get("/documents/").content.decode()
    assert 'data-tag="finance"><span>Finance</span><span class="muted facet-count">2</span>' in page
    assert 'data-tag="hr"><span>HR</span><span class="muted facet-count">1</span>' in page
    filtered = client.get("/documents/?tag=hr").content.decode()
    assert filtered.count('class="doc-row"') == 1 and "hr.txt" in filtered
    assert client.get("/documents/?q=f2").content.decode().count('class="doc-row"') == 1
    assert client.get("/documents/?status=failed").content.decode().count('class="doc-row"') == 0
    client.force_login(people["member"])
    member_page = client.get("/documents/").content.decode()
    assert member_page.count('class="doc-row"') == 2 and "hr.txt" not in member_page


def test_retry_replace_and_delete_through_the_pages(client, people, upload, vectors):
    document = upload(make_text(["Version one text."]), "doc.txt")
    client.force_login(people["owner"])
    row_action = {**HTMX, "HTTP_HX_TARGET": f"doc-{document.id}"}  # htmx names the row it swaps
    row = client.post(f"/documents/{document.id}/retry", **row_action).content.decode()
    assert f'id="doc-{document.id}"' in row and "ready" in row
    response = client.post(
        f"/documents/{document.id}/replace", {"file": SimpleUploadedFile("doc-v2.txt", b"Version two words here.")}
    )
    assert response.status_code == 302
    document.refresh_from_db()
    assert document.version == 2 and document.status == "ready"
    assert any("Version two" in r.chunk_text for r in vectors.search("version two", user_tags=["finance"]))
    row_action = {**HTMX, "HTTP_HX_TARGET": f"doc-{document.id}"}  # htmx names the row it swaps
    assert client.post(f"/documents/{document.id}/delete", **row_action).content == b""
    assert vectors.count(document_id=str(document.id)) == 0
    assert not Document.objects.exists()


def test_admin_reindex_and_delete_actions(admin_client, upload, vectors, people):
    first = upload(make_text(["Admin action one."]), "a1.txt")
    second = upload(make_text(["Admin action two."]), "a2.txt")
    changelist = admin_client.get("/admin/documents/document/?status__exact=ready")
    assert changelist.status_code == 200 and "Re-index selected documents" in changelist.content.decode()
    assert "delete_selected" not in changelist.content.decode()
    response = admin_client.post(
        "/admin/documents/document/", {"action": "reindex", "_selected_action": [first.pk]}, follow=True
    )
    assert "Re-indexing 1 document" in response.content.decode()
    first.refresh_from_db()
    assert first.status == "ready" and vectors.count(document_id=str(first.id)) == first.chunk_count
    response = admin_client.post(
        "/admin/documents/document/",
        {"action": "delete_with_vectors", "_selected_action": [first.pk, second.pk]},
        follow=True,
    )
    assert "Deleted 2 document(s)" in response.content.decode()
    assert vectors.count() == 0 and not Document.objects.exists()


def test_admin_tag_change_reindexes_with_new_tags(admin_client, upload, tags, vectors):
    document = upload(make_text(["Moving to HR."]), "move.txt")
    response = admin_client.post(
        f"/admin/documents/document/{document.pk}/change/",
        {"title": document.title, "tags": [tags["hr"].pk], "uploaded_by": document.uploaded_by_id},
        follow=True,
    )
    assert response.status_code == 200
    assert vectors.search("Moving to HR", user_tags=["finance"]) == []
    assert vectors.search("Moving to HR", user_tags=["hr"])[0].tags == ["hr"]


def test_admin_autocomplete_pages(admin_client, tags):
    assert admin_client.get("/admin/documents/tag/add/").status_code == 200
    response = admin_client.get("/admin/autocomplete/?app_label=documents&model_name=tag&field_name=owner&term=olg")
    assert response.status_code == 200 and "olga" in response.content.decode()


@pytest.mark.django_db(transaction=True)
def test_consumer_refuses_anonymous_and_pushes_rows_the_user_may_read(people, upload, settings):
    from django.contrib.auth.models import AnonymousUser

    document = upload(make_text(["Live row."]), "live.txt")

    async def scenario():
        anonymous = WebsocketCommunicator(DocumentProgressConsumer.as_asgi(), "/ws/documents/")
        anonymous.scope["user"] = AnonymousUser()
        connected, code = await anonymous.connect()
        assert not connected and code == 4401

        member = WebsocketCommunicator(DocumentProgressConsumer.as_asgi(), "/ws/documents/")
        member.scope["user"] = people["member"]
        outsider = WebsocketCommunicator(DocumentProgressConsumer.as_asgi(), "/ws/documents/")
        outsider.scope["user"] = people["outsider"]
        assert (await member.connect())[0] and (await outsider.connect())[0]
        await broadcast_document(document)
        row = await member.receive_from(timeout=5)  # an out-of-band row fragment, as every live page gets
        assert f'<tr id="doc-{document.id}"' in row and 'data-status="ready"' in row
        assert 'hx-swap-oob="true"' in row and "live.txt" in row
        count = await member.receive_from(timeout=5)
        assert 'id="document-count"' in count and 'hx-swap-oob="true"' in count and ">1 document<" in count
        assert await outsider.receive_nothing(timeout=0.3)
        await member.disconnect()
        await outsider.disconnect()

    async_to_sync(scenario)()


@pytest.mark.django_db(transaction=True)
def test_consumer_removes_a_deleted_row_out_of_band(people, upload):
    from asgiref.sync import sync_to_async

    from documents.services import document_delete

    document = upload(make_text(["Soon gone."]), "gone.txt")

    async def scenario():
        member = WebsocketCommunicator(DocumentProgressConsumer.as_asgi(), "/ws/documents/")
        member.scope["user"] = people["member"]
        assert (await member.connect())[0]
        await sync_to_async(document_delete)(document=await Document.objects.aget(pk=document.pk))
        row = await member.receive_from(timeout=5)
        assert row == f'<tr id="doc-{document.id}" hx-swap-oob="delete"></tr>'
        count = await member.receive_from(timeout=5)
        assert ">0 documents<" in count
        await member.disconnect()

    async_to_sync(scenario)()


def test_document_stuck_in_processing_can_be_retried_once_stale(client, people, upload, vectors):
    from datetime import timedelta

    from django.utils import timezone

    document = upload(make_text(["Interrupted by a restart."]), "stuck.txt")
    Document.objects.filter(pk=document.pk).update(status="processing", updated_at=timezone.now())
    client.force_login(people["owner"])
    row_action = {**HTMX, "HTTP_HX_TARGET": f"doc-{document.id}"}  # htmx names the row it swaps
    row = client.post(f"/documents/{document.id}/retry", **row_action).content.decode()
    assert "processing" in row and "Retry" not in row  # fresh: somebody is working on it
    Document.objects.filter(pk=document.pk).update(updated_at=timezone.now() - timedelta(minutes=11))
    row = client.post(f"/documents/{document.id}/retry", **row_action).content.decode()
    assert 'data-status="ready"' in row
    assert vectors.count(document_id=str(document.id)) == 1


def test_document_list_runs_a_constant_number_of_queries(db, django_user_model):
    """5 or 50 documents: the same number of queries (the manage button is decided for all rows in
    one policy query, tags and uploaders are fetched once)."""
    import uuid as _uuid

    from django.db import connection
    from django.test import Client as _Client
    from django.test.utils import CaptureQueriesContext

    from documents.models import Document, Tag

    owner = django_user_model.objects.create_user("qc-owner", password="pw-qc-12345")
    tag = Tag.objects.create(name="Counted", slug="counted", owner=owner)
    client = _Client()
    client.force_login(owner)

    def add(n: int) -> None:
        for _ in range(n):
            d = Document.objects.create(
                title=f"Doc {_uuid.uuid4().hex[:6]}",
                original_filename="d.txt",
                content_hash=_uuid.uuid4().hex,
                kind="text",
                status=Document.Status.READY,
                uploaded_by=owner,
            )
            d.tags.set([tag])

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get("/documents/").status_code == 200
        return len(queries)

    add(5)
    five = count()
    add(45)
    assert count() == five, "the documents list must not run a query per row"


def test_one_empty_file_does_not_refuse_the_others(client, people, tags, vectors, rag_runtime):
    client.force_login(people["owner"])
    response = client.post(
        "/documents/upload",
        {
            "files": _files(("empty.txt", b""), ("good.txt", make_text(["The travel budget is 900 euros."]))),
            "tags": [tags["finance"].pk],
        },
        **HTMX,
    )
    body = response.content.decode()
    assert "empty.txt: this file is empty." in body
    assert body.count('class="doc-row"') == 1 and "good.txt" in body
    assert list(Document.objects.values_list("original_filename", flat=True)) == ["good.txt"]


def test_upload_errors_say_what_to_do_without_field_names(client, people, tags, rag_runtime):
    client.force_login(people["owner"])
    no_tag = client.post("/documents/upload", {"files": _files(("a.txt", b"hello"))}, **HTMX).content.decode()
    assert "Choose at least one tag: tags decide who can read the document." in no_tag
    no_file = client.post("/documents/upload", {"tags": [tags["finance"].pk]}, **HTMX).content.decode()
    assert "Choose at least one file to upload." in no_file
    for body in (no_tag, no_file):
        assert "tags:" not in body and "files:" not in body
    assert not Document.objects.exists()


def test_a_manager_renames_a_document_and_citations_follow(client, people, upload, vectors):
    document = upload(make_text(["The expense policy allows taxis after 22:00."]), "exp-v1-final.txt")
    client.force_login(people["owner"])
    detail = client.get(f"/documents/{document.id}/").content.decode()
    assert f'action="/documents/{document.id}/rename"' in detail
    assert detail.count(">Ready<") == 1  # the status once, not "Ready Ready"
    response = client.post(f"/documents/{document.id}/rename", {"title": "  Expense   policy  "}, follow=True)
    assert "Renamed to “Expense policy”" in response.content.decode()
    document.refresh_from_db()
    assert document.title == "Expense policy" and document.title_fixed and document.status == "ready"
    hits = vectors.search("taxis after 22:00", user_tags=["finance"])
    assert hits and {h.document_name for h in hits if h.document_id == str(document.id)} == {"Expense policy"}
    # Re-indexing keeps the person's title rather than the file's.
    client.post(f"/documents/{document.id}/retry")
    document.refresh_from_db()
    assert document.title == "Expense policy"
    # Refused: empty and overlong titles (the title stays); a reader may not rename.
    for title, message in (("   ", "Give the document a title."), ("x" * 201, "at most 200 characters")):
        body = client.post(f"/documents/{document.id}/rename", {"title": title}, follow=True).content.decode()
        assert message in body
    document.refresh_from_db()
    assert document.title == "Expense policy"
    client.force_login(people["member"])
    assert client.get(f"/documents/{document.id}/").status_code == 200
    assert client.post(f"/documents/{document.id}/rename", {"title": "Mine"}).status_code == 404


def _tag(html: str, pattern: str) -> str:
    """The one opening tag of `html` that matches `pattern` (a regex over the tag's text)."""
    found = re.findall(rf"<(?:a|form|button) [^>]*{pattern}[^>]*>", html)
    assert len(found) == 1, found
    return found[0]


def test_deleting_a_document_without_script_asks_first_on_a_page_of_its_own(client, people, upload, vectors):
    """The document page's Delete leads, without script, to a page that asks (GET changes nothing); its
    Delete posts and goes to the list, its Cancel goes back. With script it still asks in a dialog
    (data-confirm) and htmx posts: from the document's page the server sends the browser to the list."""
    document = upload(make_text(["Expenses <policy> text."]), "expenses.txt")
    Document.objects.filter(pk=document.pk).update(title="Expenses <policy>")
    url = reverse("documents:delete", args=[document.pk])
    detail_url = reverse("documents:detail", args=[document.pk])
    client.force_login(people["owner"])
    link = _tag(
        client.get(detail_url).content.decode(), 'data-confirm="Delete this document and its indexed chunks\\?"'
    )
    assert link.startswith("<a ") and f'href="{url}"' in link and f'hx-post="{url}"' in link

    page = client.get(url)
    html = page.content.decode()
    assert page.status_code == 200 and "<title>Delete this document? · ragchat</title>" in html
    assert 'class="topbar"' in html and "css/app.css" in html  # the product's layout
    assert '<h1 id="confirm-title">Delete this document?</h1>' in html
    assert "“Expenses &lt;policy&gt;” and its indexed chunks will be deleted" in html
    assert re.search(rf'<form method="post" action="{url}">\s*<input type="hidden" name="csrfmiddlewaretoken"', html)
    assert f'href="{detail_url}">Cancel</a>' in html
    assert Document.objects.filter(pk=document.pk).exists()

    response = client.post(url)
    assert response.status_code == 302 and response.url == reverse("documents:list")
    assert not Document.objects.filter(pk=document.pk).exists()
    assert "“Expenses &lt;policy&gt;” and its indexed chunks were deleted." in client.get(response.url).content.decode()

    document = upload(make_text(["Asked in a dialog."]), "dialog.txt")
    url = reverse("documents:delete", args=[document.pk])
    response = client.post(url, **HTMX, HTTP_HX_CURRENT_URL=f"http://testserver{detail_url}")
    assert response.status_code == 200 and response["HX-Redirect"] == reverse("documents:list")
    assert not Document.objects.filter(pk=document.pk).exists()
    assert vectors.count(document_id=str(document.pk)) == 0


def test_the_list_rows_delete_and_retry_work_without_script(client, people, upload):
    """A row's Delete is a link to the page that asks (back to the list on Cancel), which htmx turns
    into a post after the dialog; its Retry is a form that posts (htmx swaps the row, without script
    the list comes back with a message)."""
    document = upload(make_text(["Row actions."]), "row.txt")
    client.force_login(people["owner"])
    listed = client.get(reverse("documents:list")).content.decode()
    delete_url = reverse("documents:delete", args=[document.pk])
    retry_url = reverse("documents:retry", args=[document.pk])
    delete = _tag(listed, f'hx-post="{delete_url}"')
    assert delete.startswith("<a ") and f'href="{delete_url}?from=list"' in delete
    assert f'hx-target="#doc-{document.pk}"' in delete and 'data-confirm="' in delete
    retry = _tag(listed, f'hx-post="{retry_url}"')
    assert retry.startswith("<form ") and 'method="post"' in retry and f'action="{retry_url}"' in retry
    assert re.search(rf'action="{retry_url}"[^>]*>\s*<input type="hidden" name="csrfmiddlewaretoken"', listed)
    assert '<input type="hidden" name="from" value="list">' in listed

    asked = client.get(f"{delete_url}?from=list").content.decode()
    assert f'href="{reverse("documents:list")}">Cancel</a>' in asked
    response = client.post(retry_url, {"from": "list"})
    assert response.status_code == 302 and response.url == reverse("documents:list")
    assert "Indexing started again." in client.get(response.url).content.decode()
    # htmx from the row: the row comes back (retry) and goes (delete), as before.
    row = client.post(retry_url, {"from": "list"}, **HTMX, HTTP_HX_TARGET=f"doc-{document.pk}").content.decode()
    assert row.startswith(f'<tr id="doc-{document.pk}"')
    assert client.post(delete_url, **HTMX, HTTP_HX_TARGET=f"doc-{document.pk}").content == b""
    assert not Document.objects.filter(pk=document.pk).exists()


def _unmasked(response) -> str:
    """A page without its CSRF token (masked anew on every response)."""
    return re.sub(r'(csrfmiddlewaretoken" value=|"X-CSRFToken": )"[^"]+"', "", response.content.decode())


def test_the_delete_page_of_a_document_not_yours_to_delete_is_the_missing_ones_404(client, people, upload):
    document = upload(make_text(["Finance only."]), "finance.txt")
    missing = reverse("documents:delete", args=[uuid.uuid4()])
    for who in ("member", "outsider", "other_tenant"):  # reads but may not manage; reads not; another tenant
        client.force_login(people[who])
        theirs = client.get(reverse("documents:delete", args=[document.pk]))
        absent = client.get(missing)
        assert theirs.status_code == absent.status_code == 404, who
        assert _unmasked(theirs) == _unmasked(absent), who
        assert "Finance only" not in theirs.content.decode() and "finance.txt" not in theirs.content.decode()
    assert Document.objects.filter(pk=document.pk).exists()


def test_deleting_a_document_being_indexed_says_why_in_the_message_area(client, people, upload):
    """A row still offering Delete (it was queued when the list was drawn) on a document whose indexing
    has since started: the server refuses. htmx swaps no refusal into the row, so the sentence goes to
    the page's message area (#flash) and the row comes back as it is now (out of band); without
    script the list comes back saying the same sentence."""
    from django.utils import timezone

    document = upload(make_text(["Being indexed."]), "busy.txt")
    Document.objects.filter(pk=document.pk).update(status="processing", updated_at=timezone.now())
    client.force_login(people["owner"])
    delete_url = reverse("documents:delete", args=[document.pk])
    said = f"“{document.title}” is still being indexed. Wait until indexing finishes, then delete it."

    response = client.post(delete_url, **HTMX, HTTP_HX_TARGET=f"doc-{document.pk}")
    assert response.status_code == 409
    assert response["HX-Retarget"] == "#flash" and response["HX-Reswap"] == "innerHTML"
    body = response.content.decode()
    assert f'<p class="flash-info" role="status">{said}</p>' in body
    row = re.search(rf'<tr id="doc-{document.pk}"[^>]*>', body).group(0)
    assert 'hx-swap-oob="true"' in row and 'data-status="processing"' in row
    assert f'hx-post="{delete_url}"' not in body  # the row as it is now offers no Delete
    assert Document.objects.filter(pk=document.pk).exists()

    # Without script (the page that asks first posts a form): the list, saying the same sentence.
    response = client.post(delete_url, {"from": "list"})
    assert response.status_code == 302 and response.url == reverse("documents:list")
    assert said in client.get(response.url).content.decode()
    assert Document.objects.filter(pk=document.pk).exists()
