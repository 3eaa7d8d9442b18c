"""A user without a document's tag gets none of its chunks and a 404 on its pages and file."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from access import policy
from documents import selectors
from ragchat.evaluation.docgen import make_text

pytestmark = pytest.mark.django_db

SECRET = "The merger with Globex closes on the fifth of May."


@pytest.fixture
def secret(upload):
    return upload(make_text([SECRET]), "merger.txt", tag_names=("finance",))


@pytest.fixture
def public_doc(upload, people):
    return upload(
        make_text(["The office is closed on public holidays."]),
        "holidays.txt",
        tag_names=("public",),
        user=people["admin"],
    )


def test_tag_slugs_per_role(people, tags):
    assert policy.readable_tag_slugs(user=people["member"]) == ["finance", "public"]
    assert policy.readable_tag_slugs(user=people["owner"]) == ["finance", "public"]
    assert policy.readable_tag_slugs(user=people["outsider"]) == ["public"]
    assert policy.readable_tag_slugs(user=people["admin"]) == ["finance", "hr", "public"]
    assert policy.readable_tag_slugs(user=people["other_tenant"]) == ["public"]


def test_uploadable_tags(people, tags):
    assert list(policy.uploadable_tags(user=people["owner"])) == [tags["finance"]]
    assert not policy.uploadable_tags(user=people["member"]).exists()
    assert set(policy.uploadable_tags(user=people["admin"])) == {tags["finance"], tags["hr"], tags["public"]}


def test_search_respects_tags(secret, public_doc, people, vectors):
    outsider = vectors.search(
        "merger Globex fifth of May", user_tags=policy.readable_tag_slugs(user=people["outsider"])
    )
    assert [r for r in outsider if r.document_id == str(secret.id)] == []
    assert any(
        r.document_id == str(public_doc.id) for r in vectors.search("office public holidays", user_tags=["public"])
    )
    member = vectors.search("merger Globex fifth of May", user_tags=policy.readable_tag_slugs(user=people["member"]))
    assert member and member[0].document_id == str(secret.id)
    other_tenant = vectors.search("merger Globex", user_tags=["finance", "public"], tenant_id="acme")
    assert other_tenant == []


@pytest.mark.parametrize("who", ["outsider", "other_tenant"])
def test_pages_and_file_are_404_without_the_tag(secret, people, client, who):
    client.force_login(people[who])
    for suffix in ("", "row", "file"):
        assert client.get(f"/documents/{secret.id}/{suffix}").status_code == 404
    for action in ("retry", "delete", "replace"):
        assert client.post(f"/documents/{secret.id}/{action}").status_code == 404
    listing = client.get("/documents/").content.decode()
    assert "merger" not in listing
    assert client.get("/documents/not-a-uuid/").status_code == 404


def test_member_reads_but_cannot_manage(secret, people, client, vectors):
    client.force_login(people["member"])
    assert client.get(f"/documents/{secret.id}/").status_code == 200
    download = client.get(f"/documents/{secret.id}/file")
    assert download.status_code == 200 and b"".join(download.streaming_content) == make_text([SECRET])
    assert client.post(f"/documents/{secret.id}/delete").status_code == 404
    assert vectors.count(document_id=str(secret.id)) == secret.chunk_count


def test_anonymous_is_sent_to_login(secret, client):
    response = client.get(f"/documents/{secret.id}/file")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_tag_owner_lookup(people, tags):
    lookup = async_to_sync(selectors.tag_owner_lookup)
    assert lookup("nope", "default") is None
    owner = lookup("finance", "default")
    assert owner.user_id == str(people["owner"].pk) and owner.email == "olga@example.com"
    assert lookup("finance", "acme") is None
    assert lookup("public", "default").user_id is None
    people["owner"].is_active = False
    people["owner"].save()
    assert lookup("finance", "default").email is None
    people["owner"].delete()
    assert lookup("finance", "default") == lookup("public", "default")


def test_document_for_user_and_facets(secret, public_doc, people):
    member_docs = selectors.documents_for_user(user=people["member"])
    assert set(member_docs) == {secret, public_doc}
    facets = {f["slug"]: f["count"] for f in selectors.tag_facets(user=people["member"], documents=member_docs)}
    assert facets == {"finance": 1, "public": 1}
    outsider_docs = selectors.documents_for_user(user=people["outsider"])
    assert list(outsider_docs) == [public_doc]
    assert set(selectors.documents_for_user(user=people["admin"], tag="finance")) == {secret}
