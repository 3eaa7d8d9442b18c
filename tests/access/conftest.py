"""A small world for access tests: two tenants, three tags, one person per role, documents whose
titles, filenames, files and snippets carry unique marker text, chats whose answers were built from
them, and routed questions whose drafts and sources mix documents of two tags.

What each role may read is written here by hand (READABLE), independently of `access.policy`, so
the tests compare the product against the rule rather than against itself.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import pytest
from django.core.files.base import ContentFile

from chat.models import ChatSession, Message
from documents.models import Document, Tag
from routing.models import RoutedQuestion

# Document markers: anything derived from the document carries its marker.
MK_A = "MKalpha7Q"  # a document of tag A (alpha)
MK_B = "MKbeta3Z"  # a document of tag B (beta)
MK_PUB = "MKpublic5W"  # a public document
MK_T2 = "MKtenant9X"  # a document, tag and person of another tenant
# Question markers: the asker's words in a routed question (seen by who may open that question).
Q_A = "QMKalphaQ"
Q_B = "QMKbetaQ"
Q_FB = "QMKfallbackQ"
Q_T2 = "QMKtenantQ"

ALL_MARKERS = (MK_A, MK_B, MK_PUB, MK_T2, Q_A, Q_B, Q_FB, Q_T2)

ROLES = ("anonymous", "member_a", "owner_a", "owner_b", "staff", "superuser", "other_tenant", "asker")

# The rule, by hand: which markers each role may ever see.
READABLE: dict[str, set[str]] = {
    "anonymous": set(),
    "member_a": {MK_PUB, MK_A},
    "owner_a": {MK_PUB, MK_A, Q_A},
    "owner_b": {MK_PUB, MK_B, Q_B},
    "staff": {MK_PUB},
    "superuser": {MK_PUB, MK_A, MK_B, Q_A, Q_B, Q_FB},
    "other_tenant": {MK_T2, Q_T2},
    "asker": {MK_PUB, MK_A, MK_B, Q_A, Q_B, Q_FB},
}


def forbidden_markers(role: str) -> set[str]:
    return set(ALL_MARKERS) - READABLE[role]


def leaked(role: str, text: str) -> list[str]:
    return sorted(m for m in forbidden_markers(role) if m in text)


@dataclass
class World:
    users: dict = field(default_factory=dict)
    tags: dict = field(default_factory=dict)
    docs: dict = field(default_factory=dict)
    sessions: dict = field(default_factory=dict)
    messages: dict = field(default_factory=dict)
    questions: dict = field(default_factory=dict)
    glossary: dict = field(default_factory=dict)
    sign_in: dict = field(default_factory=dict)  # group mappings, company identities, synced roles


def _source(doc: Document, marker: str, index: int = 0) -> dict:
    text = f"Passage of {doc.title}: the secret detail is {marker} and more words around it."
    return {
        "source_id": f"{doc.pk}:{index}",
        "document_id": str(doc.pk),
        "document_name": doc.title,
        "chunk_index": index,
        "page_number": 3,
        "section": f"Section {marker}",
        "relevance_score": 0.71,
        "snippet": text[:200],
        "snippet_full": text,
        "metadata": {},
    }


def build_world(django_user_model) -> World:
    w = World()
    mk = django_user_model.objects.create_user
    w.users["member_a"] = mk("mia", password="pw-mia-12345", first_name="Mia")
    w.users["owner_a"] = mk("oscar", password="pw-oscar-12345", first_name="Oscar", email="oscar@example.com")
    w.users["owner_b"] = mk("fiona", password="pw-fiona-12345", first_name="Fiona", email="fiona@example.com")
    w.users["staff"] = mk("stan", password="pw-stan-12345", first_name="Stan", is_staff=True)
    w.users["superuser"] = mk("root", password="pw-root-12345", first_name="Root", is_staff=True, is_superuser=True)
    w.users["other_tenant"] = mk(
        "tina", password="pw-tina-12345", first_name=f"Tina {MK_T2}", tenant_id="t2", email="tina@example.com"
    )
    w.users["asker"] = mk("emma", password="pw-emma-12345", first_name="Emma", email="emma@example.com")

    public, _ = Tag.objects.get_or_create(tenant_id="default", slug="public", defaults={"name": "Public"})
    alpha = Tag.objects.create(name="Alpha", slug="alpha", owner=w.users["owner_a"])
    beta = Tag.objects.create(name="Beta", slug="beta", owner=w.users["owner_b"])
    gamma = Tag.objects.create(name=f"Gamma {MK_T2}", slug="gamma", tenant_id="t2", owner=w.users["other_tenant"])
    alpha.members.add(w.users["member_a"], w.users["asker"])
    beta.members.add(w.users["asker"])
    w.tags = {"public": public, "alpha": alpha, "beta": beta, "gamma": gamma}
    from documents.models import GlossaryTerm

    w.glossary = {
        "alpha": GlossaryTerm.objects.create(tag=alpha, term="AWT", aliases=f"alpha word {MK_A}"),
        "gamma": GlossaryTerm.objects.create(tag=gamma, term="GWT", aliases=f"gamma word {MK_T2}"),
    }

    for key, marker, tag, uploader, tenant in (
        ("doc_a", MK_A, alpha, "owner_a", "default"),
        ("doc_b", MK_B, beta, "owner_b", "default"),
        ("doc_pub", MK_PUB, public, "superuser", "default"),
        ("doc_t2", MK_T2, gamma, "other_tenant", "t2"),
    ):
        doc = Document(
            tenant_id=tenant,
            title=f"Policy {marker}",
            original_filename=f"policy-{marker}.txt",
            content_hash=uuid.uuid4().hex,
            kind="text",
            mime_type="text/plain",
            status=Document.Status.READY,
            chunk_count=1,
            uploaded_by=w.users[uploader],
        )
        doc.file.save(f"policy-{marker}.txt", ContentFile(f"The original file says {marker}.".encode()), save=False)
        doc.save()
        doc.tags.set([tag])
        w.docs[key] = doc

    asker = w.users["asker"]
    # Chat 1, leak 1 of the issue: an answer built from A, then a question routed to B's owner
    # whose draft and sources mix A and B.
    s1 = ChatSession.objects.create(owner=asker, title="Passwords and leave")
    u1 = Message.objects.create(session=s1, role="user", content="How do I reset my password?")
    src_a, src_b, src_pub = (
        _source(w.docs["doc_a"], MK_A),
        _source(w.docs["doc_b"], MK_B),
        _source(w.docs["doc_pub"], MK_PUB),
    )
    a1 = Message.objects.create(
        session=s1,
        role="assistant",
        content=f"Use at least 14 characters ({MK_A}) [SourceId: {src_a['source_id']}].",
        citations=[src_a],
        passages=[src_a],
        action="CITE",
        reply_to=u1,
        confidence={"overall": 90, "retrieval": 0.9, "coverage": 0.9, "llm": 90},
    )
    u2 = Message.objects.create(session=s1, role="user", content=f"What is the parental leave policy {Q_B}?")
    a2 = Message.objects.create(
        session=s1,
        role="assistant",
        content=f"Perhaps {MK_A} and {MK_B} apply.",
        citations=[src_a, src_b],
        passages=[src_a, src_b],
        action="ROUTE",
        reply_to=u2,
        confidence={"overall": 20, "retrieval": 0.3, "coverage": 0.1, "llm": 10},
    )
    rq_b = RoutedQuestion.objects.create(
        asker=asker,
        session=s1,
        message=a2,
        question_message=u2,
        tag=beta,
        target=w.users["owner_b"],
        reason="Low confidence (20%) on Beta",
        question=u2.content,
        contextual_query=f"reset password {MK_A}: {u2.content}",
        citations=[src_a, src_b],
        draft=a2.content,
        confidence=a2.confidence,
    )
    # Chat 2: a question routed to A's owner, built from A only.
    s2 = ChatSession.objects.create(owner=asker, title="Alpha things")
    u3 = Message.objects.create(session=s2, role="user", content=f"Where is the alpha form {Q_A}?")
    a3 = Message.objects.create(
        session=s2,
        role="assistant",
        content=f"Maybe {MK_A}.",
        citations=[src_a],
        passages=[src_a],
        action="ROUTE",
        reply_to=u3,
    )
    rq_a = RoutedQuestion.objects.create(
        asker=asker,
        session=s2,
        message=a3,
        question_message=u3,
        tag=alpha,
        target=w.users["owner_a"],
        reason="Low confidence",
        question=u3.content,
        contextual_query=u3.content,
        citations=[src_a],
        draft=a3.content,
    )
    # Chat 3: an untagged question that fell back to the admins.
    s3 = ChatSession.objects.create(owner=asker, title="Misc")
    u4 = Message.objects.create(session=s3, role="user", content=f"Who waters the plants {Q_FB}?")
    a4 = Message.objects.create(
        session=s3,
        role="assistant",
        content=f"The public page says {MK_PUB}.",
        citations=[src_pub],
        passages=[src_pub],
        action="ROUTE",
        reply_to=u4,
    )
    rq_fb = RoutedQuestion.objects.create(
        asker=asker,
        session=s3,
        message=a4,
        question_message=u4,
        tag=None,
        target=None,
        fallback=True,
        reason="No owner",
        question=u4.content,
        contextual_query=u4.content,
        citations=[src_pub],
        draft=a4.content,
    )
    # Another tenant's chat and question.
    tina = w.users["other_tenant"]
    s4 = ChatSession.objects.create(owner=tina, title="Gamma")
    u5 = Message.objects.create(session=s4, role="user", content=f"Gamma question {Q_T2}?")
    src_t2 = _source(w.docs["doc_t2"], MK_T2)
    a5 = Message.objects.create(
        session=s4,
        role="assistant",
        content=f"Gamma says {MK_T2}.",
        citations=[src_t2],
        passages=[src_t2],
        action="ROUTE",
        reply_to=u5,
    )
    rq_t2 = RoutedQuestion.objects.create(
        tenant_id="t2",
        asker=tina,
        session=s4,
        message=a5,
        question_message=u5,
        tag=gamma,
        target=tina,
        reason="Low confidence",
        question=u5.content,
        contextual_query=u5.content,
        citations=[src_t2],
        draft=a5.content,
    )
    w.sessions = {"s1": s1, "s2": s2, "s3": s3, "s4": s4}
    w.messages = {"a1": a1, "a2": a2, "a3": a3, "a4": a4, "a5": a5}
    w.questions = {"rq_a": rq_a, "rq_b": rq_b, "rq_fb": rq_fb, "rq_t2": rq_t2}

    # Company sign-in: a group mapping, an identity and a synced membership per tenant (the other
    # tenant's carry its marker: an admin's lists must not show them).
    from access.models import GroupMapping, OIDCIdentity, SyncedMembership

    mia, tina = w.users["member_a"], w.users["other_tenant"]
    w.sign_in = {
        "mappings": [
            GroupMapping.objects.create(group="alpha-readers", tag=alpha),
            GroupMapping.objects.create(tenant_id="t2", group=f"gamma-{MK_T2}", tag=gamma),
        ],
        "identities": [
            OIDCIdentity.objects.create(
                user=mia, issuer="https://idp.example.com", subject="mia-1", groups=["alpha-readers"]
            ),
            OIDCIdentity.objects.create(
                user=tina, issuer="https://idp.example.com", subject=f"tina-{MK_T2}", groups=[f"gamma-{MK_T2}"]
            ),
        ],
        "synced": [
            SyncedMembership.objects.create(
                user=mia, tag=alpha, role="member", groups=["alpha-readers"], kept_manual=True
            ),
            SyncedMembership.objects.create(user=tina, tag=gamma, role="owner", groups=[f"gamma-{MK_T2}"]),
        ],
    }
    return w


@pytest.fixture
def world(db, django_user_model, settings, tmp_path) -> World:
    settings.MEDIA_ROOT = tmp_path / "media"
    return build_world(django_user_model)
