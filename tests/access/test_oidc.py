"""Company sign-in (OpenID Connect) and group → tag sync, against a real provider.

The provider (tests/access/oidc_provider.py) runs as a process of its own and is reached over real
HTTP: discovery, JWKS, a sign-in form, the token endpoint (code with PKCE, refresh tokens) and
userinfo, with RS256-signed ID tokens. The tests drive the whole flow: ragchat's sign-in redirects
to the provider, the test signs in there as the person would (posting the form), and follows the
provider's redirect back to ragchat's callback, which exchanges the code and checks the token.
Retrieval is checked through the JSON API's search (the chat's retrieval pipeline on the real
embedded Qdrant) with the person's own access token.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx
import jwt
import pytest
from asgiref.sync import async_to_sync
from bs4 import BeautifulSoup
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.core.management import CommandError, call_command
from django.test import Client

from access import oidc
from access.models import AuditEvent, GroupMapping, OIDCIdentity, SyncedMembership
from documents.models import Document, Tag
from ragchat.services.types import ChunkRecord

pytestmark = pytest.mark.django_db

HERE = Path(__file__).resolve().parent
CLIENT_ID = "ragchat-tests"
CLIENT_SECRET = "client-secret-for-the-tests"
CALLBACK = "http://testserver/oidc/callback/"
SIGN_IN_PAGE = "http://testserver/accounts/login/"  # registered as the post-logout redirect URI
MK_FIN = "MKfinance4R"  # in the finance document's chunk
MK_HR = "MKpeople8T"  # in the HR document's chunk


@dataclass
class IdP:
    issuer: str
    process: subprocess.Popen

    def control(self, **data) -> dict:
        response = httpx.post(self.issuer + "/control", json=data, timeout=10)
        response.raise_for_status()
        return response.json()

    def person(self, name: str, *, groups: list[str], disabled: bool = False) -> None:
        self.control(users={name: {"groups": groups, "disabled": disabled, "email": f"{name}@example.com"}})


@pytest.fixture(scope="module")
def idp_process():
    process = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "oidc_provider.py"),
            "--client-id",
            CLIENT_ID,
            "--client-secret",
            CLIENT_SECRET,
            "--redirect-uri",
            CALLBACK,
            "--post-logout-redirect-uri",
            SIGN_IN_PAGE,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("READY "), f"the provider did not start: {line!r}"
    yield IdP(issuer=f"http://127.0.0.1:{int(line.split()[1])}", process=process)
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture
def idp(idp_process, settings):
    """Company sign-in configured against the provider process; its people reset."""
    settings.RAGCHAT_OIDC_ISSUER = idp_process.issuer
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_RP_SCOPES = "openid email profile groups offline_access"
    settings.RAGCHAT_OIDC_LABEL = "Example Corp"
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, "access.oidc.OIDCBackend"]
    users = idp_process.control()["users"]
    idp_process.control(users=dict.fromkeys(users), forge=None, end_session=True, sessions={})
    oidc.forget_discovery()
    yield idp_process
    oidc.forget_discovery()


@pytest.fixture
def tags(db):
    Tag.objects.get_or_create(tenant_id="default", slug="public", defaults={"name": "Public"})
    finance = Tag.objects.create(name="Finance", slug="finance")
    hr = Tag.objects.create(name="People", slug="people")
    GroupMapping.objects.create(group="finance-team", tag=finance, role="member")
    GroupMapping.objects.create(group="finance-leads", tag=finance, role="owner")
    GroupMapping.objects.create(group="/staff/people", tag=hr, role="member")
    return {"finance": finance, "people": hr}


def sign_in(client: Client, idp: IdP, username: str, *, browser: httpx.Client | None = None):
    """The whole flow: ragchat → the provider's sign-in form (real HTTP) → ragchat's callback.
    `browser`: the provider's side of a browser, which keeps the provider's session cookie."""
    at_provider = browser or httpx.Client()
    start = client.get("/oidc/authenticate/")
    assert start.status_code == 302, start.content[:300]
    assert start["Location"].startswith(idp.issuer + "/authorize?")
    page = at_provider.get(start["Location"], timeout=10)
    assert page.status_code == 200, page.text
    form = BeautifulSoup(page.text, "html.parser")
    fields = {i["name"]: i.get("value", "") for i in form.select("form input[type=hidden]")}
    assert fields["code_challenge_method"] == "S256" and fields["nonce"] and fields["state"]
    answer = at_provider.post(idp.issuer + "/authorize", data={**fields, "username": username}, timeout=10)
    assert answer.status_code == 302, answer.text
    back = urlparse(answer.headers["location"])
    assert f"{back.scheme}://{back.netloc}{back.path}" == CALLBACK
    return client.get(f"{back.path}?{back.query}")


def _flash(client: Client) -> str:
    return client.get("/accounts/login/").content.decode()


def _index(tags) -> dict[str, Document]:
    """A document per tag, in the database and in the real embedded Qdrant."""
    from ragchat import runtime

    docs = {}
    for slug, marker in (("finance", MK_FIN), ("people", MK_HR)):
        doc = Document(
            title=f"Travel rules {marker}",
            original_filename=f"travel-{slug}.txt",
            content_hash=uuid.uuid4().hex,
            kind="text",
            mime_type="text/plain",
            status=Document.Status.READY,
            chunk_count=1,
        )
        doc.file.save(f"travel-{slug}.txt", ContentFile(f"Travel {marker}".encode()), save=False)
        doc.save()
        doc.tags.set([tags[slug]])
        docs[slug] = doc
    records = [
        ChunkRecord(
            document_id=str(docs[slug].pk),
            chunk_index=0,
            document_name=docs[slug].title,
            chunk_text=f"Travel policy: economy class for trips under six hours. Reference {marker}.",
            tags=(slug,),
        )
        for slug, marker in (("finance", MK_FIN), ("people", MK_HR))
    ]

    async def upsert():
        service = await runtime.ready_vector_service()
        await service.upsert_chunks(records)

    async_to_sync(upsert)()
    return docs


def _token(user) -> str:
    from api.services import token_create

    return token_create(user=user, name="tests", scopes=["read"], expires_in_days=1).secret


def _retrieves(secret: str) -> str:
    """What the person's next question retrieves (the JSON API's search: the chat's pipeline)."""
    response = Client(HTTP_AUTHORIZATION=f"Bearer {secret}").get(
        "/api/v1/search", {"q": "What is the travel policy for trips?", "k": 10}
    )
    assert response.status_code == 200, response.content
    return response.content.decode()


@pytest.fixture
def retrieval(rag_runtime, settings, tags):
    from dataclasses import replace

    from ragchat import runtime

    settings.RAG = replace(settings.RAG, rag_min_similarity_score=0.05)
    runtime.reset()
    return _index(tags)


# ----------------------------------------------------------------------------------- sign-in


def test_first_company_sign_in_creates_the_person_with_their_mapped_tags(idp, tags):
    idp.person("alice", groups=["finance-team", "unmapped-group"])
    client = Client()
    response = sign_in(client, idp, "alice")
    assert response.status_code == 302 and response["Location"] == "/"
    alice = get_user_model().objects.get(username="alice")
    assert alice.email == "alice@example.com" and alice.tenant_id == "default" and not alice.has_usable_password()
    assert client.get("/").status_code == 200  # signed in
    assert list(alice.member_tags.values_list("slug", flat=True)) == ["finance"]
    synced = SyncedMembership.objects.get(user=alice)
    assert (synced.tag.slug, synced.role, synced.groups, synced.kept_manual) == (
        "finance",
        "member",
        ["finance-team"],
        False,
    )
    identity = OIDCIdentity.objects.get(user=alice)
    assert identity.subject == "sub-alice" and identity.groups == ["finance-team", "unmapped-group"]
    assert identity.refresh_token and oidc.unseal(identity.refresh_token)  # kept, and not in clear
    assert oidc.unseal(identity.refresh_token) not in identity.refresh_token
    sign_ins = AuditEvent.objects.filter(action="sign_in", subject=alice)
    assert sign_ins.count() == 1 and "with Example Corp" in sign_ins.get().summary
    added = AuditEvent.objects.get(action="membership_added", subject=alice)
    assert "finance-team" in added.summary and added.data["source"] == "group sync (sign-in)"

    # The second sign-in finds the same person by the provider's subject; nothing changes.
    client.post("/accounts/logout/")
    assert sign_in(Client(), idp, "alice").status_code == 302
    assert get_user_model().objects.filter(email="alice@example.com").count() == 1
    assert AuditEvent.objects.filter(action="membership_added").count() == 1


def test_an_existing_local_account_is_linked_by_email_and_keeps_its_manual_tags(idp, tags, django_user_model):
    bea = django_user_model.objects.create_user("bea.local", email="Bea@Example.com", password="pw-bea-12345")
    tags["people"].members.add(bea)
    idp.person("bea", groups=["/staff/people", "finance-team"])
    assert sign_in(Client(), idp, "bea").status_code == 302
    assert OIDCIdentity.objects.get(subject="sub-bea").user == bea  # linked, not a second account
    assert sorted(bea.member_tags.values_list("slug", flat=True)) == ["finance", "people"]
    assert SyncedMembership.objects.get(user=bea, tag=tags["people"]).kept_manual  # it was hers by hand

    idp.person("bea", groups=[])  # she leaves both groups
    assert sign_in(Client(), idp, "bea").status_code == 302
    assert list(bea.member_tags.values_list("slug", flat=True)) == ["people"]  # the manual one stays
    assert not SyncedMembership.objects.filter(user=bea).exists()


def test_leaving_a_group_drops_the_tag_at_the_next_sign_in_and_its_documents_from_the_next_question(
    idp, tags, retrieval
):
    idp.person("carl", groups=["finance-team"])
    assert sign_in(Client(), idp, "carl").status_code == 302
    carl = get_user_model().objects.get(username="carl")
    secret = _token(carl)
    before = _retrieves(secret)
    assert MK_FIN in before and MK_HR not in before

    idp.person("carl", groups=["/staff/people"])  # moved from finance to people at the provider
    assert sign_in(Client(), idp, "carl").status_code == 302
    after = _retrieves(secret)
    assert MK_FIN not in after and MK_HR in after
    removed = AuditEvent.objects.get(action="membership_removed", subject=carl)
    assert "left finance-team" in removed.summary


def test_sync_groups_asks_the_provider_for_everyone(idp, tags, retrieval):
    for name in ("dana", "eli", "finn"):
        idp.person(name, groups=["finance-team"])
        assert sign_in(Client(), idp, name).status_code == 302
    User = get_user_model()
    dana, eli, finn = (User.objects.get(username=n) for n in ("dana", "eli", "finn"))
    secrets = {u.username: _token(u) for u in (dana, eli, finn)}
    assert all(MK_FIN in _retrieves(s) for s in secrets.values())

    idp.person("dana", groups=[])  # removed from the group
    idp.person("eli", groups=["finance-team"], disabled=True)  # disabled at the provider
    out = _call("sync_groups")
    assert "synced 3 people" in out and "1 refused by the provider" in out
    assert MK_FIN not in _retrieves(secrets["dana"])
    assert MK_FIN not in _retrieves(secrets["eli"])  # invalid_grant: every synced membership goes
    assert MK_FIN in _retrieves(secrets["finn"])
    assert OIDCIdentity.objects.get(user=eli).refresh_token == ""
    assert "invalid_grant" in OIDCIdentity.objects.get(user=eli).sync_error
    run = AuditEvent.objects.get(action="groups_synced")
    assert run.data["synced"] == 3 and run.data["refused"] == 1 and run.data["changed"] == 2

    # The provider cannot be reached: nothing changes, and the run says so.
    oidc.forget_discovery()
    from django.conf import settings

    settings.RAGCHAT_OIDC_ISSUER = "http://127.0.0.1:9"
    with pytest.raises(CommandError, match="could not be synced"):
        _call("sync_groups")
    assert MK_FIN in _retrieves(secrets["finn"])
    assert "cannot be reached" in OIDCIdentity.objects.get(user=finn).sync_error


def _call(*args) -> str:
    from io import StringIO

    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_owner_mapping_makes_an_owner_and_hands_over_when_they_leave(idp, tags):
    idp.person("gina", groups=["finance-leads"])
    idp.person("hugo", groups=["finance-leads"])
    assert sign_in(Client(), idp, "gina").status_code == 302
    assert sign_in(Client(), idp, "hugo").status_code == 302
    finance = Tag.objects.get(slug="finance")
    User = get_user_model()
    gina, hugo = User.objects.get(username="gina"), User.objects.get(username="hugo")
    assert finance.owner == gina  # the first; hugo reads it as a member
    assert finance.members.filter(pk=hugo.pk).exists()

    idp.person("gina", groups=[])
    assert sign_in(Client(), idp, "gina").status_code == 302
    finance.refresh_from_db()
    assert finance.owner == hugo  # handed to the other person of the owners' group
    assert not finance.members.filter(pk=gina.pk).exists()
    change = AuditEvent.objects.filter(action="tag_owner_changed", subject=gina).latest("id")
    assert "hugo owns it now" in change.summary


def test_a_token_without_the_group_list_keeps_the_synced_tags(idp, tags):
    """Entra ID's overage: the token points to the groups instead of listing them. The person signs
    in; nothing is taken from them on a list we did not get, and the identity says why."""
    idp.person("rita", groups=["finance-team"])
    assert sign_in(Client(), idp, "rita").status_code == 302
    idp.control(users={"rita": {"overage": True}})
    assert sign_in(Client(), idp, "rita")["Location"] == "/"
    rita = get_user_model().objects.get(username="rita")
    assert list(rita.member_tags.values_list("slug", flat=True)) == ["finance"]
    assert "overage" in OIDCIdentity.objects.get(user=rita).sync_error
    out = _call("sync_groups", "--offline")  # last-known groups still apply
    assert "synced 1 people: 0 changed" in out


def test_a_mapping_added_in_the_admin_applies_at_once_to_last_known_groups(idp, tags, django_user_model):
    idp.person("ivy", groups=["legal"])
    assert sign_in(Client(), idp, "ivy").status_code == 302
    ivy = django_user_model.objects.get(username="ivy")
    assert not ivy.member_tags.exists()
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw-root-12345")
    client = Client()
    client.force_login(admin)
    response = client.post(
        "/admin/access/groupmapping/add/", {"group": "legal", "tag": tags["people"].pk, "role": "member"}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert list(ivy.member_tags.values_list("slug", flat=True)) == ["people"]
    assert GroupMapping.objects.get(group="legal").tenant_id == "default"
    again = client.post(
        "/admin/access/groupmapping/add/", {"group": " legal ", "tag": tags["people"].pk, "role": "owner"}
    )
    assert again.status_code == 200 and "is already mapped to People" in again.content.decode()
    assert GroupMapping.objects.filter(group="legal").count() == 1
    # The tag's admin page tells synced from manual.
    page = client.get(f"/admin/documents/tag/{tags['people'].pk}/change/").content.decode()
    assert "Synced from the identity provider" in page and "legal" in page


# ----------------------------------------------------------------------------------- refused


@pytest.mark.parametrize(
    "forge, message",
    [
        ("wrong_signature", "signature does not match"),
        ("wrong_audience", "issued for another application"),
        ("expired", "has expired"),
        ("wrong_nonce", "nonce mismatch"),
        ("wrong_issuer", "was not issued by Example Corp"),
    ],
)
def test_a_bad_id_token_is_refused_with_a_clear_message_and_audited(idp, tags, forge, message):
    idp.person("mallory", groups=["finance-team"])
    idp.control(forge=forge)
    client = Client()
    response = sign_in(client, idp, "mallory")
    assert response.status_code == 302 and response["Location"] == "/accounts/login/"
    page = _flash(client)
    assert message in page
    assert client.get("/").status_code == 302  # not signed in
    assert not get_user_model().objects.filter(username="mallory").exists()
    failed = AuditEvent.objects.get(action="sign_in_failed")
    assert message in failed.summary and failed.data["method"] == "oidc"
    assert "as “mallory (claimed by a refused token)”" in failed.summary and failed.subject is None


def test_refused_company_sign_ins_do_not_lock_out_the_address(idp, tags, settings):
    """Everyone behind one office address signs in with the provider: failures there are audited,
    not counted by django-axes against the address (the provider throttles its own sign-in)."""
    idp.person("quinn", groups=["finance-team"])
    for _ in range(settings.AXES_FAILURE_LIMIT + 1):
        idp.control(forge="wrong_signature")
        assert sign_in(Client(), idp, "quinn")["Location"] == "/accounts/login/"
    assert AuditEvent.objects.filter(action="sign_in_failed").count() == settings.AXES_FAILURE_LIMIT + 1
    assert sign_in(Client(), idp, "quinn")["Location"] == "/"


def test_a_person_the_provider_refuses_gets_a_message_and_an_audit_entry(idp, tags):
    idp.person("nina", groups=[], disabled=True)
    client = Client()
    response = sign_in(client, idp, "nina")
    assert response["Location"] == "/accounts/login/"
    assert "Example Corp did not sign you in: unknown or disabled user" in _flash(client)
    assert AuditEvent.objects.filter(action="sign_in_failed", data__method="oidc").count() == 1


def test_a_replayed_callback_is_refused(idp, tags):
    idp.person("olga", groups=[])
    client = Client()
    start = client.get("/oidc/authenticate/")
    page = httpx.get(start["Location"], timeout=10)
    fields = {
        i["name"]: i.get("value", "") for i in BeautifulSoup(page.text, "html.parser").select("input[type=hidden]")
    }
    back = urlparse(httpx.post(idp.issuer + "/authorize", data={**fields, "username": "olga"}).headers["location"])
    assert client.get(f"{back.path}?{back.query}").status_code == 302
    client.post("/accounts/logout/")
    again = client.get(f"{back.path}?{back.query}")
    assert again.status_code == 302 and again["Location"] == "/accounts/login/"
    assert "stale or was already used" in _flash(client)


def test_a_crafted_error_link_shows_no_text_of_its_own(idp):
    client = Client()
    response = client.get("/oidc/callback/", {"error": "x", "error_description": "Call 555-0100 now", "state": "s"})
    assert response["Location"] == "/accounts/login/"
    page = _flash(client)
    assert "Call 555-0100" not in page and "stale or was already used" in page


def test_an_unreachable_provider_says_so_on_the_sign_in_page(idp, settings):
    settings.RAGCHAT_OIDC_ISSUER = "http://127.0.0.1:9"
    client = Client()
    response = client.get("/oidc/authenticate/")
    assert response.status_code == 302 and response["Location"] == "/accounts/login/"
    assert "Example Corp cannot be reached right now" in _flash(client)


# ----------------------------------------------------------------------------------- signing out


def _provider_signs_in_silently(client: Client, browser: httpx.Client) -> bool:
    """Whether starting a company sign-in goes through the provider without its form (its own
    session is still on in this browser)."""
    start = client.get("/oidc/authenticate/")
    answer = browser.get(start["Location"], timeout=10)
    return answer.status_code == 302 and answer.headers["location"].startswith(CALLBACK)


def test_signing_out_ends_the_providers_session_too(idp, tags):
    idp.person("alice", groups=["finance-team"])
    client, browser = Client(), httpx.Client()
    assert sign_in(client, idp, "alice", browser=browser)["Location"] == "/"
    assert list(idp.control()["sessions"].values()) == ["alice"]

    out = client.post("/accounts/logout/")
    assert out.status_code == 302 and out["Location"].startswith(idp.issuer + "/end_session?")
    query = parse_qs(urlparse(out["Location"]).query)
    assert query["post_logout_redirect_uri"] == [SIGN_IN_PAGE] and query["client_id"] == [CLIENT_ID]
    hint = jwt.decode(query["id_token_hint"][0], options={"verify_signature": False})
    assert hint["sub"] == "sub-alice" and hint["aud"] == CLIENT_ID
    assert client.get("/")["Location"].startswith("/accounts/login/")  # signed out of ragchat at once

    back = browser.get(out["Location"], timeout=10)  # the browser follows to the provider
    assert back.status_code == 302 and back.headers["location"] == SIGN_IN_PAGE
    assert idp.control()["sessions"] == {}
    assert not _provider_signs_in_silently(Client(), browser)  # the provider asks again


def test_without_an_end_session_endpoint_signing_out_is_ragchats_alone(idp, tags):
    """Google's discovery document names no end_session_endpoint: ragchat's session ends, the
    provider's stays, and the next company sign-in in that browser goes through without its form."""
    idp.control(end_session=False)
    idp.person("gus", groups=[])
    client, browser = Client(), httpx.Client()
    assert sign_in(client, idp, "gus", browser=browser)["Location"] == "/"
    out = client.post("/accounts/logout/")
    assert out.status_code == 302 and out["Location"] == "/accounts/login/"
    assert client.get("/")["Location"].startswith("/accounts/login/")
    assert list(idp.control()["sessions"].values()) == ["gus"]
    assert _provider_signs_in_silently(client, browser)


def test_a_password_sign_in_signs_out_locally_and_an_unreachable_provider_is_said(idp, tags, settings):
    get_user_model().objects.create_user("pam", password="pw-pam-12345")
    client = Client()
    assert client.post("/accounts/login/", {"username": "pam", "password": "pw-pam-12345"}).status_code == 302
    assert client.post("/accounts/logout/")["Location"] == "/accounts/login/"  # no ID token: nothing to end

    idp.person("hal", groups=[])
    assert sign_in(client, idp, "hal")["Location"] == "/"
    oidc.forget_discovery()
    settings.RAGCHAT_OIDC_ISSUER = "http://127.0.0.1:9"
    out = client.post("/accounts/logout/")
    assert out["Location"] == "/accounts/login/" and client.get("/")["Location"].startswith("/accounts/login/")
    assert "Example Corp could not be reached to end your sign-in there" in _flash(client)


# ----------------------------------------------------------------------------------- passwords


def test_the_sign_in_page_offers_the_company_button_next_to_passwords(idp):
    html = Client().get("/accounts/login/").content.decode()
    assert "Sign in with Example Corp" in html and 'name="password"' in html


def test_without_company_sign_in_the_page_and_routes_are_as_before(client):
    html = client.get("/accounts/login/").content.decode()
    assert "Sign in with" not in html and 'name="password"' in html
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/", {"code": "x", "state": "y"}).status_code == 404


def test_local_passwords_off_refuses_the_password_form(idp, settings, django_user_model):
    django_user_model.objects.create_user("pat", password="pw-pat-12345")
    django_user_model.objects.create_superuser("root", "root@example.com", "pw-root-12345")
    settings.RAGCHAT_LOCAL_PASSWORDS = "false"
    settings.AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "access.oidc.OIDCBackend"]
    client = Client()
    html = client.get("/accounts/login/").content.decode()
    assert "Sign in with Example Corp" in html and 'name="password"' not in html
    response = client.post("/accounts/login/", {"username": "pat", "password": "pw-pat-12345"})
    assert response.status_code == 403 and "Password sign-in is turned off" in response.content.decode()
    assert client.get("/").status_code == 302
    admin_login = client.post("/admin/login/", {"username": "root", "password": "pw-root-12345"})
    assert admin_login.status_code == 200 and client.get("/admin/").status_code == 302  # refused there too

    # The way back in for an administrator: RAGCHAT_LOCAL_PASSWORDS=admins.
    settings.RAGCHAT_LOCAL_PASSWORDS = "admins"
    settings.AUTHENTICATION_BACKENDS = [
        "axes.backends.AxesStandaloneBackend",
        "access.oidc.AdminPasswordBackend",
        "access.oidc.OIDCBackend",
    ]
    assert "administrators only" in client.get("/accounts/login/").content.decode()
    assert client.post("/accounts/login/", {"username": "pat", "password": "pw-pat-12345"}).status_code == 200
    assert client.get("/").status_code == 302
    assert client.post("/accounts/login/", {"username": "root", "password": "pw-root-12345"}).status_code == 302
    assert client.get("/").status_code == 200
