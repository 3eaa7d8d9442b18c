"""The permission matrix: every route of the URL resolver and every websocket route, for every role.

Routes are read from the resolver, so a new view joins the matrix by itself — and fails it until it
is classified below (ROUTES). For each (route, role):
- no response body, redirect target or websocket frame carries a marker the role may not read
  (READABLE in conftest, written by hand);
- a role the rule refuses is refused (anonymous to the sign-in page, everyone else a 404 or 403),
  and a role it allows is served;
- a state-changing route changes nothing for a refused role (each route names the state it guards).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from tests.access.conftest import MK_A, MK_B, MK_PUB, MK_T2, ROLES, World, build_world, leaked

pytestmark = pytest.mark.django_db


# ----------------------------------------------------------------------------------- the routes


def _walk(patterns, prefix="", namespace=""):
    for p in patterns:
        if isinstance(p, URLResolver):
            ns = f"{namespace}:{p.namespace}" if p.namespace and namespace else (p.namespace or namespace)
            yield from _walk(p.url_patterns, prefix + str(p.pattern), ns)
        elif isinstance(p, URLPattern):
            label = p.name or f"<unnamed {prefix + str(p.pattern)}>"
            name = f"{namespace}:{label}" if namespace else label
            yield name, prefix + str(p.pattern)


def all_routes() -> list[tuple[str, str]]:
    return sorted(set(_walk(get_resolver().url_patterns)))


def ws_routes() -> list[str]:
    from ragchat.ws_urls import websocket_urlpatterns

    return sorted(str(p.pattern) for p in websocket_urlpatterns)


# Who may do what, by role, written from the rule (not from the policy module).
SIGNED_IN = {r for r in ROLES if r != "anonymous"}
HAS_INBOX = {"owner_a", "owner_b", "superuser", "other_tenant"}
CAN_UPLOAD = {"owner_a", "owner_b", "superuser", "other_tenant"}
READS_DOC = {
    "doc_a": {"member_a", "owner_a", "superuser", "asker"},
    "doc_b": {"owner_b", "superuser", "asker"},
    "doc_pub": {"member_a", "owner_a", "owner_b", "staff", "superuser", "asker"},
    "doc_t2": {"other_tenant"},
}
MANAGES_DOC = {
    "doc_a": {"owner_a", "superuser"},
    "doc_b": {"owner_b", "superuser"},
    "doc_pub": {"superuser"},
    "doc_t2": {"other_tenant"},
}
OPENS_QUESTION = {
    "rq_a": {"owner_a", "superuser"},
    "rq_b": {"owner_b", "superuser"},
    "rq_fb": {"superuser"},
    "rq_t2": {"other_tenant"},
}
OWNS_SESSION = {"s1": {"asker"}, "s2": {"asker"}, "s3": {"asker"}, "s4": {"other_tenant"}}
OWNS_MESSAGE = {"a1": {"asker"}, "a2": {"asker"}, "a5": {"other_tenant"}}


@dataclass(frozen=True)
class Route:
    """How to call a route and who may: `variants` maps a label to (URL kwargs, roles allowed);
    `state` (POST routes) reads the state the route guards, to compare before and after."""

    method: str
    variants: Callable[[World], dict[str, tuple[dict, set[str]]]]
    data: dict | Callable[[World, str], dict] | None = None
    state: Callable[[World, str], object] | None = None
    # "token": the JSON API, called with a personal access token of the role (every scope: the
    # token must reach no more than its person); "session": the web pages' sign-in.
    auth: str = "session"
    json: bool = False  # send `data` as a JSON body
    # The route starts a chat turn, which runs its database work on a thread of its own: the world
    # must be committed for that thread to see it (on PostgreSQL), so it gets a transactional one.
    turn: bool = False


def one(allowed: set[str]):
    return lambda w: {"": ({}, allowed)}


def docs(table):
    def variants(w):
        out = {k: ({"document_id": w.docs[k].pk}, table[k]) for k in w.docs}
        out["absent"] = ({"document_id": uuid.uuid4()}, set())
        return out

    return variants


def pdf_pages(w):
    """Page 1 of every document, each made a one-page PDF that names its marker (on first use)."""
    from django.core.files.base import ContentFile

    from ragchat.evaluation.docgen import make_pdf

    if not getattr(w, "pdfs", False):
        for doc in w.docs.values():
            doc.file.save(f"{doc.pk}.pdf", ContentFile(make_pdf([f"The original PDF says {doc.title}."])), save=False)
            doc.kind, doc.pages = "pdf", 1
            doc.save()
        w.pdfs = True
    out = {k: ({"document_id": w.docs[k].pk, "page": 1}, READS_DOC[k]) for k in w.docs}
    out["absent"] = ({"document_id": uuid.uuid4(), "page": 1}, set())
    return out


def questions(w):
    out = {k: ({"question_id": q.pk}, OPENS_QUESTION[k]) for k, q in w.questions.items()}
    out["absent"] = ({"question_id": 999999}, set())
    return out


REPORTS = {"alpha": {"owner_a", "superuser"}, "beta": {"owner_b", "superuser"}, "gamma": {"other_tenant"}}


def reports(w):
    """Knowledge-gap reports: a tag's owners and its tenant's admins; "no tag" admins only."""
    out = {k: ({"slug": k}, roles) for k, roles in REPORTS.items()}
    out["untagged"] = ({"slug": "_untagged"}, {"superuser"})
    out["public"] = ({"slug": "public"}, set())
    out["absent"] = ({"slug": "no-such-tag"}, set())
    return out


def sessions(w):
    return {k: ({"session_id": s.pk}, OWNS_SESSION[k]) for k, s in w.sessions.items()}


def messages(w):
    return {k: ({"message_id": w.messages[k].pk}, roles) for k, roles in OWNS_MESSAGE.items()}


MANAGES_SITE = {
    "site_a": {"owner_a", "superuser"},
    "site_b": {"owner_b", "superuser"},
    "site_t2": {"other_tenant"},
}


def site_sources(w):
    """Website imports of tags alpha, beta and gamma (tenant t2), made on first use. Their start URL
    is a loopback address, refused by the SSRF guard, so a crawl started here sends nothing."""
    from documents.models import SiteSource

    if not hasattr(w, "sites"):
        w.sites = {
            key: SiteSource.objects.create(
                tenant_id=tag.tenant_id,
                name=f"Site of {tag.name}",
                tag=tag,
                start_urls=["http://127.0.0.1:9/"],
                allowed_domains=["127.0.0.1"],
            )
            for key, tag in (("site_a", w.tags["alpha"]), ("site_b", w.tags["beta"]), ("site_t2", w.tags["gamma"]))
        }
    out = {k: ({"site_id": site.pk}, MANAGES_SITE[k]) for k, site in w.sites.items()}
    out["absent"] = ({"site_id": 999999}, set())
    return out


MANAGES_VERIFIED = {"va_a": {"owner_a", "superuser"}, "va_b": {"owner_b", "superuser"}, "va_t2": {"other_tenant"}}


def verified_answers(w):
    """Verified knowledge on tags alpha, beta and gamma (tenant t2), made on first use; each needs
    review and has no document (so retiring or editing touches no other row of the world)."""
    from django.utils import timezone

    from routing.models import VerifiedAnswer

    if not hasattr(w, "verified"):
        w.verified = {
            key: VerifiedAnswer.objects.create(
                tenant_id=tag.tenant_id,
                tag=tag,
                question=f"Verified question {marker}?",
                answer=f"Verified answer {marker}.",
                verified_by=tag.owner,
                verified_at=timezone.now(),
                review_by=timezone.localdate(),
                status=VerifiedAnswer.Status.NEEDS_REVIEW,
                needs_review_reason=f"Its review date passed {marker}.",
            )
            for key, tag, marker in (
                ("va_a", w.tags["alpha"], MK_A),
                ("va_b", w.tags["beta"], MK_B),
                ("va_t2", w.tags["gamma"], MK_T2),
            )
        }
    out = {k: ({"verified_id": v.pk}, MANAGES_VERIFIED[k]) for k, v in w.verified.items()}
    out["absent"] = ({"verified_id": 999999}, set())
    return out


def _verified_state(w, key):
    from routing.models import VerifiedAnswer

    v = getattr(w, "verified", {}).get(key)
    fields = ("status", "question", "answer", "verified_at", "verified_by", "document")
    return VerifiedAnswer.objects.filter(pk=v.pk).values(*fields).first() if v else None


def review_items(w):
    """A review item (a down vote with a reason on a1, alpha's answer, for alpha's owner), made on
    first use; review actions 404 on routed questions that are not review items."""
    from chat.models import AnswerFeedback
    from routing.models import RoutedQuestion

    if not hasattr(w, "review"):
        a1 = w.messages["a1"]
        feedback = AnswerFeedback.objects.create(
            message=a1, user=w.users["asker"], vote=-1, reason="outdated", comment="Changed last month."
        )
        w.review = RoutedQuestion.objects.create(
            asker=w.users["asker"],
            session=a1.session,
            message=a1,
            question_message=a1.reply_to,
            tag=w.tags["alpha"],
            target=w.users["owner_a"],
            reason="Review: Routing to alpha owner",
            origin="feedback",
            feedback=feedback,
            question=a1.reply_to.content,
            citations=list(a1.citations),
            draft=a1.content,
        )
    return {
        "rv_a": ({"question_id": w.review.pk}, {"owner_a", "superuser"}),
        "rq_a": ({"question_id": w.questions["rq_a"].pk}, set()),  # not a review item
        "absent": ({"question_id": 999999}, set()),
    }


def _review_state(w, key):
    from documents.models import Document
    from routing.models import RoutedQuestion

    review = getattr(w, "review", None)
    row = RoutedQuestion.objects.filter(pk=review.pk).values("status", "resolution").first() if review else None
    return row, _question_state(w, "rq_a"), list(Document.objects.values_list("outdated_at", flat=True))


CLEARS_OUTDATED = {
    "doc_a": {"owner_a", "superuser"},
    "doc_b": {"owner_b", "superuser"},
    "doc_pub": {"superuser"},
    "doc_t2": {"other_tenant"},
}


def outdated_docs(w):
    """Every document marked outdated (by nobody in particular), so clearing it changes something."""
    from django.utils import timezone

    from documents.models import Document

    Document.objects.filter(pk__in=[d.pk for d in w.docs.values()]).update(
        outdated_at=timezone.now(), outdated_note="Old."
    )
    return docs(CLEARS_OUTDATED)(w)


def _outdated_state(w, key):
    from documents.models import Document

    doc = w.docs.get(key)
    return Document.objects.filter(pk=doc.pk).values_list("outdated_at", flat=True).first() if doc else None


def _site_state(w, key):
    from documents.models import CrawlRun, SiteSource

    site = getattr(w, "sites", {}).get(key)
    return (SiteSource.objects.filter(pk=site.pk).exists() if site else None), CrawlRun.objects.count()


def _doc_state(w, key):
    from documents.models import Document

    doc = w.docs.get(key)
    d = Document.objects.filter(pk=doc.pk).values("status", "version", "title").first() if doc else None
    return d, Document.objects.count()


def _question_state(w, key):
    from routing.models import RoutedQuestion

    q = w.questions.get(key)
    return (
        RoutedQuestion.objects.filter(pk=q.pk).values("status", "answer", "published_document").first() if q else None
    )


def _session_state(w, key):
    from chat.models import ChatSession

    s = w.sessions.get(key)
    return ChatSession.objects.filter(pk=s.pk).values("title").first() if s else None


def _session_flags(w, key):
    from chat.models import ChatSession

    s = w.sessions.get(key)
    return ChatSession.objects.filter(pk=s.pk).values("pinned_at", "archived_at").first() if s else None


def _counts(*labels):
    def state(w, key):
        from django.apps import apps

        return tuple(apps.get_model(label).objects.count() for label in labels)

    return state


def _tokens(w):
    """A token of the asker, of owner_a and of another tenant's person: revoked by its own person
    or an admin of its tenant only."""
    from api.services import token_create

    if not hasattr(w, "token_rows"):
        w.token_rows = {
            key: token_create(user=w.users[role], name=f"Token of {role}", scopes=["read"], expires_in_days=None).token
            for key, role in (("tok_asker", "asker"), ("tok_owner_a", "owner_a"), ("tok_t2", "other_tenant"))
        }
    allowed = {"tok_asker": {"asker", "superuser"}, "tok_owner_a": {"owner_a", "superuser"}, "tok_t2": {"other_tenant"}}
    out = {k: ({"token_id": t.pk}, allowed[k]) for k, t in w.token_rows.items()}
    out["absent"] = ({"token_id": 999999}, set())
    return out


def _token_state(w, key):
    from api.models import AccessToken

    t = getattr(w, "token_rows", {}).get(key)
    return AccessToken.objects.filter(pk=t.pk).values("revoked_at").first() if t else None


def _api_upload(w, role):
    """One small text file to a tag the role may upload to (unique bytes: no duplicate refusal)."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    tag = {"owner_b": "beta", "other_tenant": "gamma"}.get(role, "alpha")
    body = f"Notes uploaded through the API by {role}: the quarterly plan and its review dates.".encode()
    return {"files": SimpleUploadedFile(f"notes-{role}.txt", body, content_type="text/plain"), "tags": tag}


ROUTES: dict[str, Route] = {
    "home": Route("GET", one(SIGNED_IN)),
    "health": Route("GET", one(set(ROLES))),
    "login": Route("GET", one(set(ROLES))),
    "logout": Route("POST", one(set(ROLES)), state=_counts("chat.ChatSession")),
    "chat:new": Route(
        "POST", one(SIGNED_IN), data={"question": "A first question for a new chat"}, state=_counts("chat.ChatSession")
    ),
    "chat:session": Route("GET", sessions),
    # "MK" is in every marker: each person's matches, excerpts included, must be their own.
    "chat:search": Route("GET", one(SIGNED_IN), data={"q": "MK"}),
    "chat:rename": Route("POST", sessions, data={"title": "Renamed by someone"}, state=_session_state),
    "chat:export_md": Route("GET", sessions),
    "chat:pin": Route("POST", sessions, state=lambda w, k: _session_flags(w, k)),
    "chat:archive": Route("POST", sessions, state=lambda w, k: _session_flags(w, k)),
    "chat:archived": Route("GET", one(SIGNED_IN)),
    "chat:export_pdf": Route("GET", sessions),
    "chat:delete": Route("POST", sessions, state=_session_state),
    # Where the menu's Delete leads without script: the page that asks first (it deletes nothing).
    "chat:delete#ask": Route("GET", sessions, state=_session_state),
    "documents:list": Route("GET", one(SIGNED_IN)),
    "documents:upload": Route("POST", one(CAN_UPLOAD), state=_counts("documents.Document")),
    "documents:detail": Route("GET", docs(READS_DOC)),
    "documents:row": Route("GET", docs(READS_DOC)),
    "documents:download": Route("GET", docs(READS_DOC)),
    # The viewer: readers of the document; its "Chunks as indexed" tab only shows to those who manage
    # it (the others get the document's text); a PDF's page image is one more read of the document.
    "documents:view": Route("GET", docs(READS_DOC), data={"chunk": "0"}),
    "documents:view#chunks": Route("GET", docs(READS_DOC), data={"chunk": "0", "show": "chunks"}),
    "documents:view#pdf": Route(
        "GET", lambda w: {k: ({"document_id": v[0]["document_id"]}, v[1]) for k, v in pdf_pages(w).items()}
    ),
    "documents:page": Route("GET", pdf_pages),
    "documents:retry": Route("POST", docs(MANAGES_DOC), state=_doc_state),
    "documents:replace": Route("POST", docs(MANAGES_DOC), state=_doc_state),
    "documents:delete": Route("POST", docs(MANAGES_DOC), state=_doc_state),
    # Where Delete leads without script: the page that asks first (it deletes nothing).
    "documents:delete#ask": Route("GET", docs(MANAGES_DOC), state=_doc_state),
    "documents:rename": Route("POST", docs(MANAGES_DOC), data={"title": "Renamed by the matrix"}, state=_doc_state),
    "documents:sites": Route("GET", one(CAN_UPLOAD)),
    # Without data the form is shown again with its errors: nothing is created, nothing is fetched.
    "documents:site_create": Route("POST", one(CAN_UPLOAD), state=_counts("documents.SiteSource")),
    "documents:site_detail": Route("GET", site_sources),
    "documents:site_crawl": Route("POST", site_sources, state=_site_state),
    "documents:site_delete": Route("POST", site_sources, state=_site_state),
    "documents:site_delete#ask": Route("GET", site_sources, state=_site_state),
    "routing:inbox": Route("GET", one(HAS_INBOX)),
    "routing:mine": Route("GET", one(SIGNED_IN)),
    "routing:question": Route("GET", questions),
    "routing:question#answer": Route(
        "POST", questions, data={"answer": "An answer from a person."}, state=_question_state
    ),
    "routing:publish": Route("POST", questions, state=_question_state),
    "routing:close": Route("POST", questions, state=_question_state),
    "routing:report": Route("GET", reports),
    "routing:report_csv": Route("GET", reports),
    "routing:escalate": Route("POST", messages, state=_counts("routing.RoutedQuestion")),
    # One's own notification settings (no id in the URL: nobody else's are reachable).
    "routing:notifications": Route("GET", one(SIGNED_IN)),
    # One's own "what's new" (the bell): one's unread answers, what waits in one's own inbox.
    "routing:whats_new": Route("GET", one(SIGNED_IN)),
    "routing:notifications#save": Route(
        "POST",
        one(SIGNED_IN),
        data={"email_questions": "on", "digest": "daily"},
        state=_counts("routing.NotificationPreference"),
    ),
    "routing:knowledge": Route("GET", one(HAS_INBOX)),
    "routing:knowledge_detail": Route("GET", verified_answers),
    "routing:knowledge_detail#edit": Route(
        "POST",
        verified_answers,
        data={"question": "Edited by the matrix?", "answer": "Edited by the matrix."},
        state=_verified_state,
    ),
    "routing:knowledge_reverify": Route("POST", verified_answers, state=_verified_state),
    "routing:knowledge_retire": Route("POST", verified_answers, state=_verified_state),
    "routing:feedback": Route(
        "POST",
        messages,
        data={"vote": "-1", "reason": "wrong", "comment": "No."},
        state=_counts("chat.AnswerFeedback", "routing.RoutedQuestion"),
    ),
    "routing:review_outdated": Route(
        "POST",
        review_items,
        data=lambda w, role: {"document": str(w.docs["doc_a"].pk), "note": "Superseded."},
        state=_review_state,
    ),
    "routing:review_dismiss": Route("POST", review_items, data={"note": "It is right."}, state=_review_state),
    "documents:clear_outdated": Route("POST", outdated_docs, state=_outdated_state),
    "access:view_as": Route("GET", one({"superuser"})),
    "access:view_as#run": Route("POST", one({"superuser"}), state=_counts("access.AuditEvent")),
    "access:audit": Route("GET", one({"superuser"})),
    "access:audit#csv": Route("GET", one({"superuser"}), data={"format": "csv", "person": "o"}),
    # Company sign-in is not configured in this world: its routes do not exist for anyone (404).
    # Configured, they are the sign-in flow itself, open to all: tests/access/test_oidc.py.
    "oidc:authenticate": Route("GET", one(set())),
    "oidc:callback": Route("GET", one(set()), data={"code": "c", "state": "s"}),
    # Personal access token pages (session) and the JSON API (token of the role, every scope).
    "tokens:list": Route("GET", one(SIGNED_IN)),
    "tokens:admin": Route("GET", one({"superuser"})),
    "tokens:revoke": Route("POST", _tokens, state=_token_state),
    "api:api-root": Route("GET", one(set()), auth="token"),
    "api:openapi-json": Route("GET", one(set(ROLES))),
    "api:openapi-view": Route("GET", one(set(ROLES))),
    "api:health": Route("GET", one(set(ROLES)), auth="token"),
    "api:search": Route("GET", one(SIGNED_IN), data={"q": "What is the secret detail MK?", "k": 10}, auth="token"),
    "api:chat": Route(
        "POST",
        one(SIGNED_IN),
        data={"question": "What is the secret detail of the policy?"},
        state=_counts("chat.ChatSession", "chat.Message"),
        auth="token",
        json=True,
        turn=True,
    ),
    "api:documents": Route("GET", one(SIGNED_IN), auth="token"),
    "api:documents_upload": Route(
        "POST", one(CAN_UPLOAD), data=_api_upload, state=_counts("documents.Document"), auth="token"
    ),
    "api:document": Route("GET", docs(READS_DOC), auth="token"),
    "api:document_delete": Route("DELETE", docs(MANAGES_DOC), state=_doc_state, auth="token"),
    "api:sessions": Route("GET", one(SIGNED_IN), auth="token"),
    "api:session": Route("GET", sessions, auth="token"),
    "api:questions": Route("GET", one(SIGNED_IN), auth="token"),
    "api:question_answer": Route(
        "POST", questions, data={"answer": "An answer from a person."}, state=_question_state, auth="token", json=True
    ),
}
# The Django admin site (every one of its generated routes): admins only, their own tenant's rows.
ADMIN_NAMESPACE = "admin"


def route_names() -> list[str]:
    return [name for name, _ in all_routes()]


def test_every_route_is_classified():
    unclassified = [
        (name, pattern)
        for name, pattern in all_routes()
        if not name.startswith(ADMIN_NAMESPACE + ":") and name not in ROUTES
    ]
    assert not unclassified, f"routes missing from the permission matrix: {unclassified}"
    stale = [n for n in ROUTES if n.split("#")[0] not in set(route_names())]
    assert not stale, f"matrix entries with no route: {stale}"


def test_every_websocket_route_is_classified():
    assert set(ws_routes()) == set(WS_ROUTES), f"unclassified websocket routes: {set(ws_routes()) ^ set(WS_ROUTES)}"


# ----------------------------------------------------------------------------------- HTTP


def client_for(role: str, w: World, auth: str = "session") -> Client:
    if auth == "token":
        from api.models import AccessToken
        from api.services import token_create

        if role == "anonymous":
            return Client()
        secret = token_create(
            user=w.users[role], name="matrix", scopes=list(AccessToken.Scope.values), expires_in_days=1
        ).secret
        return Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    client = Client()
    if role != "anonymous":
        client.force_login(w.users[role])
    return client


def _body(response) -> str:
    if getattr(response, "streaming", False):
        content = b"".join(response.streaming_content)
    else:
        content = response.content
    text = content.decode("utf-8", errors="replace")
    return text + "\n" + response.get("Location", "")


def _is_login_redirect(response) -> bool:
    return response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def _refused(role: str, response) -> bool:
    if role == "anonymous":
        return _is_login_redirect(response) or response.status_code in (401, 403, 404)
    return response.status_code in (403, 404)


def _reverse(name: str, kwargs: dict) -> str:
    from django.urls import reverse

    return reverse(name.split("#")[0], kwargs=kwargs)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("name", sorted(n for n, r in ROUTES.items() if not r.turn))
def test_route_for_role(name, role, rag_runtime, world):
    _check_route(name, role, world)


@pytest.fixture
def committed_world(transactional_db, django_user_model, settings, tmp_path) -> World:
    settings.MEDIA_ROOT = tmp_path / "media"
    return build_world(django_user_model)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("name", sorted(n for n, r in ROUTES.items() if r.turn))
def test_turn_route_for_role(name, role, rag_runtime, committed_world):
    _check_route(name, role, committed_world)


def _check_route(name: str, role: str, world: World) -> None:
    route = ROUTES[name]
    client = client_for(role, world, route.auth)
    for label, (kwargs, allowed) in route.variants(world).items():
        url = _reverse(name, kwargs)
        before = route.state(world, label) if route.state else None
        data = route.data(world, role) if callable(route.data) else (route.data or {})
        if route.method == "GET":
            response = client.get(url, data)
        elif route.method == "DELETE":
            response = client.delete(url)
        elif route.json:
            response = client.post(url, json.dumps(data), content_type="application/json")
        else:
            response = client.post(url, data)
        where = f"{route.method} {url} ({label or name}) as {role}: {response.status_code}"
        assert not leaked(role, _body(response)), f"{where} leaks {leaked(role, _body(response))}"
        if role in allowed:
            assert response.status_code < 400, f"{where}: refused an allowed role"
            assert name == "logout" or not _is_login_redirect(response), f"{where}: sent an allowed role to sign in"
        else:
            assert _refused(role, response), f"{where}: not refused"
            if route.state:
                assert route.state(world, label) == before, f"{where}: changed state"


# ----------------------------------------------------------------------------------- admin site


def _admin_urls(w: World) -> list[tuple[str, str, bool]]:
    """(url, label, tenant-own) for every admin route, filled with each fixture object of its model."""
    from django.apps import apps
    from django.urls import NoReverseMatch, reverse

    objects = {
        "ragchat_user": list(w.users.values()),
        "ragchat_user_password": list(w.users.values()),
        "documents_tag": list(w.tags.values()),
        "documents_document": list(w.docs.values()),
        "routing_routedquestion": list(w.questions.values()),
        "documents_glossaryterm": list(w.glossary.values()),
        "access_groupmapping": w.sign_in["mappings"],
        "access_oidcidentity": w.sign_in["identities"],
        "access_syncedmembership": w.sign_in["synced"],
    }
    urls = []
    for name, pattern in all_routes():
        if not name.startswith(ADMIN_NAMESPACE + ":"):
            continue
        short = name.split(":", 1)[1]
        if "<" not in pattern:
            urls.append((reverse(name), short, True))
            continue
        if short == "app_list":
            for config in apps.get_app_configs():
                try:
                    urls.append((reverse(name, kwargs={"app_label": config.label}), short, True))
                except NoReverseMatch:
                    continue
            continue
        if short == "view_on_site":
            continue  # a redirect to the object's public URL: covered by that URL's own route
        model_key, _, action = short.rpartition("_")
        for obj in objects.get(model_key, []):
            tenant = getattr(obj, "tenant_id", None) or obj.user.tenant_id
            urls.append((reverse(name, args=[obj.pk]), short, tenant == "default"))
    return urls


READ_ONLY_ADMIN = {"access_syncedmembership_delete"}


@pytest.mark.parametrize("role", ROLES)
def test_admin_site_for_role(role, rag_runtime, world):
    client = client_for(role, world)
    urls = _admin_urls(world)
    assert len(urls) > 20
    for url, label, own_tenant in urls:
        response = client.get(url)
        where = f"GET {url} as {role}: {response.status_code}"
        assert not leaked(role, _body(response)), f"{where} leaks {leaked(role, _body(response))}"
        if label in ("login", "logout", "autocomplete"):
            continue  # the sign-in pages; autocomplete without its parameters (checked below with them)
        if role == "superuser" and own_tenant:
            # Some models are added elsewhere; synced memberships are read only (sync writes them).
            ok = (200, 403) if label.endswith("_add") or label in READ_ONLY_ADMIN else (200,)
            assert response.status_code in ok, where
        elif role == "superuser":
            # another tenant's object does not exist here (a read-only page refuses before looking)
            assert response.status_code in ((302, 403, 404) if label in READ_ONLY_ADMIN else (302, 404)), where
        else:
            assert response.status_code == 302 and "/admin/login/" in response["Location"], where
    autocomplete = client.get(
        "/admin/autocomplete/", {"app_label": "documents", "model_name": "document", "field_name": "tags", "term": ""}
    )
    assert not leaked(role, _body(autocomplete))


def test_admin_refuses_state_changes_from_non_admins(rag_runtime, world):
    from documents.models import Document

    doc = world.docs["doc_a"]
    for role in ("member_a", "owner_a", "staff", "other_tenant", "asker"):
        client = client_for(role, world)
        response = client.post(f"/admin/documents/document/{doc.pk}/delete/", {"post": "yes"})
        assert response.status_code == 302 and "/admin/login/" in response["Location"], role
        response = client.post(f"/admin/documents/document/{doc.pk}/change/", {"title": "changed"})
        assert response.status_code == 302 and "/admin/login/" in response["Location"], role
    assert Document.objects.filter(pk=doc.pk, title=doc.title).exists()


# ----------------------------------------------------------------------------------- websockets

WS_ROUTES = ("ws/chat/<uuid:session_id>/", "ws/documents/", "ws/inbox/", "ws/nav/")


async def _socket(path: str, user) -> WebsocketCommunicator:
    from ragchat.asgi import application
    from tests.chat.conftest import session_cookie

    headers = [(b"origin", b"http://testserver"), (b"host", b"testserver")]
    if user is not None:
        cookie = await sync_to_async(session_cookie)(user)
        headers.append((b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={cookie}".encode()))
    return WebsocketCommunicator(application, path, headers=headers)


async def _frames(comm: WebsocketCommunicator, *, wait: float = 0.4, expect: frozenset[str] = frozenset()) -> list[str]:
    """Every frame that arrives until nothing more does for `wait` seconds. With `expect`, the quiet
    wait starts only once every one of those markers has arrived (up to 10 s each), so a frame that
    comes late on a loaded machine is not taken for one that never comes."""
    frames: list[str] = []
    while not all(any(m in f for f in frames) for m in expect):
        try:
            frames.append(await comm.receive_from(timeout=10))
        except TimeoutError:
            break
    while not await comm.receive_nothing(timeout=wait):
        frames.append(await comm.receive_from(timeout=5))
    return frames


@pytest.fixture
def async_world(transactional_db, django_user_model, settings, tmp_path, rag_runtime):
    settings.MEDIA_ROOT = tmp_path / "media"
    return build_world(django_user_model)


@pytest.mark.parametrize("role", ROLES)
async def test_chat_socket_for_role(role, async_world):
    w = async_world
    user = w.users.get(role)
    for key, session in w.sessions.items():
        comm = await _socket(f"/ws/chat/{session.pk}/?sync={w.messages['a2'].pk}", user)
        connected, _ = await comm.connect(timeout=5)
        assert connected == (role in OWNS_SESSION[key]), f"{role} on {key}: connected={connected}"
        if connected:
            for frame in await _frames(comm):
                assert not leaked(role, frame), f"{role} on {key} got {leaked(role, frame)}"
        await comm.disconnect()


@pytest.mark.parametrize("role", ROLES)
async def test_documents_socket_for_role(role, async_world):
    from documents.services import progress_group

    w = async_world
    user = w.users.get(role)
    comm = await _socket("/ws/documents/", user)
    connected, _ = await comm.connect(timeout=5)
    assert connected == (role != "anonymous")
    if not connected:
        return
    layer = get_channel_layer()
    for doc in w.docs.values():  # every document's event, to every tenant's group
        for tenant in ("default", "t2"):
            await layer.group_send(progress_group(tenant), {"type": "document.changed", "document_id": str(doc.pk)})
    expected = {
        m
        for key, m in (("doc_a", MK_A), ("doc_b", MK_B), ("doc_pub", MK_PUB), ("doc_t2", MK_T2))
        if role in READS_DOC[key]
    }
    frames = await _frames(comm, expect=frozenset(expected))
    for frame in frames:
        assert not leaked(role, frame), f"{role} got {leaked(role, frame)}"
    seen = {m for m in (MK_A, MK_B, MK_PUB, MK_T2) if any(m in f for f in frames)}
    assert seen == expected, f"{role}: rows for {seen}, expected {expected}"
    await comm.disconnect()


@pytest.mark.parametrize("path", ["/ws/inbox/", "/ws/nav/"])
@pytest.mark.parametrize("role", ROLES)
async def test_inbox_and_nav_sockets_for_role(role, path, async_world):
    """Both join only the user's own group; every question's event (and a badge recount) yields
    nothing the role may not see, and the badges count only the user's own figures."""
    from routing.context_processors import nav_figures
    from routing.services import user_group_name

    w = async_world
    user = w.users.get(role)
    comm = await _socket(path, user)
    connected, _ = await comm.connect(timeout=5)
    assert connected == (role != "anonymous")
    if not connected:
        return
    layer = get_channel_layer()
    for question in w.questions.values():  # every question's event, sent to this user's own group
        await layer.group_send(user_group_name(user.pk), {"type": "inbox.question", "question_id": question.pk})
    await layer.group_send(user_group_name(user.pk), {"type": "nav.badges"})
    frames = await _frames(comm, expect=frozenset({'id="nav-bell-count"'}))
    for frame in frames:
        assert not leaked(role, frame), f"{role} got {leaked(role, frame)}"
    figures = await sync_to_async(nav_figures)(user)
    assert frames and 'id="nav-bell-count"' in frames[-1]
    assert f">{figures['bell']}</span>" in frames[-1]
    assert ('id="nav-inbox-count"' in frames[-1]) == figures["has_inbox"]
    await comm.disconnect()


def test_matrix_size():
    """The note reports roles × routes: keep the count honest."""
    http = len(ROUTES)
    admin = sum(1 for n, _ in all_routes() if n.startswith(ADMIN_NAMESPACE + ":"))
    assert http >= 20 and admin >= 20 and len(WS_ROUTES) == 4
    print(json.dumps({"roles": len(ROLES), "http_routes": http, "admin_routes": admin, "ws_routes": len(WS_ROUTES)}))
