"""The JSON API over real HTTP against a daphne process (its own SQLite file and embedded Qdrant, the
hashing embedder, the fake Ollama server as the model), with tokens of different people and scopes:
upload → status → search → chat (JSON and server-sent events) → sessions → routed question answered
by the owner → delete; health; the docs page and schema; and the measured overhead of POST chat over
the websocket (same question, same fake model), written to test-artifacts/api-chat-overhead.json."""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import time
from pathlib import Path

import httpx
import pytest

from tests.api.live import ask_websocket, client, seeded_api_server, sse_events, upload

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"

SETUP = r"""
import json
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore
from ragchat.models import User
from documents.services import tag_create, tag_ensure_public
from api.services import token_create
mk = User.objects.create_user
olga = mk("olga", password="pw-olga-12345", first_name="Olga", email="olga@example.com")
mike = mk("mike", password="pw-mike-12345", first_name="Mike")
nina = mk("nina", password="pw-nina-12345", first_name="Nina")
root = mk("root", password="pw-root-12345", is_superuser=True, is_staff=True)
tom = mk("tom", password="pw-tom-12345", tenant_id="t2")
tag_ensure_public(tenant_id="default")
alpha = tag_create(tenant_id="default", name="Alpha", slug="alpha", owner=olga, members=[mike])
from documents.models import GlossaryTerm
GlossaryTerm.objects.create(tag=alpha, term="PTO", aliases="vacation days; paid time off")
tag_create(tenant_id="t2", name="Gamma", slug="gamma", owner=tom)
ALL = ["read", "chat", "upload", "answer"]
tokens = {
    "olga": token_create(user=olga, name="olga", scopes=ALL, expires_in_days=1).secret,
    "mike": token_create(user=mike, name="mike", scopes=ALL, expires_in_days=1).secret,
    "mike_read": token_create(user=mike, name="mike-read", scopes=["read"], expires_in_days=1).secret,
    "nina": token_create(user=nina, name="nina", scopes=ALL, expires_in_days=1).secret,
    "root": token_create(user=root, name="root", scopes=ALL, expires_in_days=1).secret,
    "tom": token_create(user=tom, name="tom", scopes=ALL, expires_in_days=1).secret,
}
store = SessionStore()
store[SESSION_KEY] = str(mike.pk)
store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
store[HASH_SESSION_KEY] = mike.get_session_auth_hash()
store.create()
print(json.dumps({"tokens": tokens, "cookie": store.session_key}))
"""

DOC_TEXT = (
    "Vacation carry-over policy. Unused vacation days carry over to the next year, up to a maximum of "
    "five days. The carry-over expires on March 31. Managers approve carry-over requests in the HR portal."
)
QUESTION = "How many unused vacation days carry over to the next year?"


@pytest.fixture(scope="module")
def server(tmp_path_factory, ollama_server):
    server = seeded_api_server(
        tmp_path_factory.mktemp("api-live"),
        ollama_url=ollama_server.url,
        setup=SETUP,
        extra_env={"RAGCHAT_API_CHAT_RATE": "1000/m", "RAGCHAT_API_RATE": "5000/m"},
    )
    yield server
    server.stop()


def error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == code and body["message"] and body["request_id"] == response.headers["X-Request-ID"]
    return body


@pytest.fixture(scope="module")
def document(server):
    """Olga uploads a document to her tag through the API; it is indexed by the server."""
    with client(server, "olga") as olga:
        doc = upload(olga, "carry-over.txt", DOC_TEXT, ["alpha"])
    assert doc["chunks"] >= 1 and doc["progress"] in (0, 100)
    return doc


def test_upload_rules_and_messages_are_the_web_pages(server, document):
    with client(server, "olga") as olga:
        # The same bytes again: the web page's duplicate message, nothing stored.
        again = olga.post(
            "/documents", files=[("files", ("copy.txt", DOC_TEXT.encode(), "text/plain"))], data={"tags": ["alpha"]}
        )
        body = error(again, 422, "upload_refused")
        assert "this content already exists as “carry-over”" in body["message"]
        empty = olga.post("/documents", files=[("files", ("empty.txt", b"", "text/plain"))], data={"tags": ["alpha"]})
        assert "empty" in error(empty, 422, "upload_refused")["message"]
        # A tag she does not own is not a choice she has.
        other = olga.post(
            "/documents", files=[("files", ("n.txt", b"Other notes.", "text/plain"))], data={"tags": ["public"]}
        )
        # The web page's message, without a field name; forbidden, nothing uploaded.
        assert error(other, 403, "tag_not_allowed")["message"] == "You may not upload to one of the chosen tags."
        listing = olga.get("/documents", params={"tag": "alpha", "status": "ready"}).json()
        assert listing["count"] == 1 and listing["items"][0]["id"] == document["id"]
    with client(server, "mike") as mike:  # a member may read, not upload
        refused = mike.post(
            "/documents", files=[("files", ("m.txt", b"Mike's notes.", "text/plain"))], data={"tags": ["alpha"]}
        )
        error(refused, 404, "not_found")
        assert mike.get(f"/documents/{document['id']}").json()["can_manage"] is False


def test_search_returns_only_what_the_caller_may_read(server, document):
    with client(server, "mike") as mike:
        found = mike.get("/search", params={"q": "vacation carry-over days", "k": 5})
        assert found.status_code == 200, found.text
        body = found.json()
        assert body["query"] == "vacation carry-over days" and body["k"] == 5
        [hit] = [r for r in body["results"] if r["document_id"] == document["id"]][:1]
        assert hit["title"] == "carry-over" and "carry over" in hit["snippet"]
        assert hit["chunk_id"] == f"{document['id']}:0" and 0 < hit["score"] <= 1
        assert hit["url"] == f"{server.url}/documents/{document['id']}/" and hit["tags"] == ["alpha"]
        narrowed = mike.get("/search", params={"q": "vacation carry-over days", "tags": ["public"]}).json()
        assert narrowed["results"] == []
    for outsider in ("nina", "tom"):
        with client(server, outsider) as c:
            assert c.get("/search", params={"q": "vacation carry-over days"}).json()["results"] == []
            assert c.get("/search", params={"q": "vacation carry-over", "tags": ["alpha"]}).json()["results"] == []
            absent = c.get("/documents/00000000-0000-4000-8000-000000000000")
            forbidden = c.get(f"/documents/{document['id']}")
            assert error(absent, 404, "not_found")["message"] == error(forbidden, 404, "not_found")["message"]
            assert c.get("/documents").json()["count"] == 0


def test_search_expands_glossary_terms_of_readable_tags_only(server, document):
    """Issue 16: a query naming a glossary term is also searched by its other names, and the
    results say which terms matched; a person who may not read the tag gets no expansion from it."""
    with client(server, "mike") as mike:
        found = mike.get("/search", params={"q": "How much PTO rolls over?"}).json()
        assert found["glossary_terms"] == ["PTO"]
        assert [h["document_id"] for h in found["results"]][:1] == [document["id"]]
        plain = mike.get("/search", params={"q": "vacation carry-over days"}).json()
        assert plain["glossary_terms"] == []  # "vacation days" is not a whole phrase of this query
    with client(server, "nina") as nina:
        assert nina.get("/search", params={"q": "How much PTO rolls over?"}).json()["glossary_terms"] == []


def test_chat_answers_with_citations_and_continues_a_session(server, document, fake_ollama):
    fake_ollama.reply_citing(1, words=8, prefix="Five days carry over.")
    with client(server, "mike") as mike:
        first = mike.post("/chat", json={"question": QUESTION})
        assert first.status_code == 200, first.text
        a = first.json()
        assert a["request_id"] == first.headers["X-Request-ID"]
        assert a["question"] == QUESTION and a["answer"].startswith("Five days carry over")
        assert a["citations"] == [f"{document['id']}:0"] and a["action"] == "answered" and a["routed_to"] is None
        cited = a["citation_map"][a["citations"][0]]
        assert cited["title"] == "carry-over" and cited["url"] == f"{server.url}/documents/{document['id']}/"
        assert cited["document_id"] == document["id"] and "page" in cited and "section" in cited
        assert cited["viewer_url"] == f"{server.url}/documents/{document['id']}/view?chunk=0#passage"
        assert set(a["confidence"]) == {"overall", "retrieval", "coverage", "llm"} and a["confidence"]["overall"] > 0
        assert a["model"] == "llama3.2" and a["timings"]["total"] > 0
        # Issue 16: the per-sentence grounding check (A2), with offsets into the answer.
        grounding = a["grounding"]
        assert grounding["claims"] == len([x for x in grounding["sentences"] if x["status"] != "none"]) >= 1
        excerpt = grounding["sentences"][-1]
        assert excerpt["status"] == "supported" and excerpt["cited"] == a["citations"]
        assert a["answer"][excerpt["start"] : excerpt["end"]].endswith(f"[SourceId: {a['citations'][0]}].")
        follow = mike.post("/chat", json={"question": "And when does it expire?", "session_id": a["session_id"]})
        assert follow.status_code == 200 and follow.json()["session_id"] == a["session_id"]
        sessions = mike.get("/sessions").json()
        assert a["session_id"] in [s["id"] for s in sessions]
        history = mike.get(f"/sessions/{a['session_id']}").json()
        assert [m["role"] for m in history["messages"]] == ["user", "assistant", "user", "assistant"]
        assert history["messages"][1]["citations"] == a["citations"]
        assert history["messages"][1]["grounding"] == grounding
        assert history["messages"][3]["content"] == follow.json()["answer"]
        # The session's transcript is the one the web chat shows: the same stored messages.
        with client(server, "mike_read") as read_only:
            assert read_only.get(f"/sessions/{a['session_id']}").json() == history
            error(read_only.post("/chat", json={"question": QUESTION}), 403, "scope_missing")
    with client(server, "nina") as nina:  # someone else's session: absent
        error(nina.post("/chat", json={"question": QUESTION, "session_id": a["session_id"]}), 404, "not_found")
        forbidden = error(nina.get(f"/sessions/{a['session_id']}"), 404, "not_found")
        absent = error(nina.get("/sessions/00000000-0000-4000-8000-000000000000"), 404, "not_found")
        assert forbidden["message"] == absent["message"]


def test_chat_streams_server_sent_events_token_by_token(server, document, fake_ollama):
    fake_ollama.reply_citing(1, words=20, prefix="Streaming answer:")
    fake_ollama.token_delay(0.02)
    with client(server, "mike") as mike:
        with mike.stream("POST", "/chat", json={"question": QUESTION}, headers={"Accept": "text/event-stream"}) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            events = sse_events(r)
    names = [n for n, _, _ in events]
    assert names[0] == "start" and names[-1] == "final" and "stage" in names, (events[-1], server.log_text()[-3000:])
    tokens = [(d["text"], at) for n, d, at in events if n == "token"]
    assert len(tokens) >= 20, names
    final = events[-1][1]
    assert "".join(t for t, _ in tokens) == final["answer"] and final["answer"].startswith("Streaming answer:")
    assert final["citations"] and final["session_id"] == events[0][1]["session_id"]
    assert final["message_id"] == events[0][1]["message_id"]
    # Token by token: the first token came well before the last (20 ms apart at the model).
    assert tokens[-1][1] - tokens[0][1] > 0.2


def test_a_model_that_never_cites_gets_attributed_citations_alike_everywhere(server, document, fake_ollama):
    # The model writes no marker; ragchat attaches the passage's citation to the supported
    # sentence while it streams. The tokens, the stored message, the API's citation_map and
    # grounding, the session history and the chat page all say it was attributed by ragchat.
    # (19 words: up to "five days", the figure the question asks for)
    fake_ollama.reply_citing(1, words=19, prefix="Here is what I found:")
    fake_ollama.habits(citations="none")
    with client(server, "mike") as mike:
        with mike.stream("POST", "/chat", json={"question": QUESTION}, headers={"Accept": "text/event-stream"}) as r:
            events = sse_events(r)
        final = events[-1][1]
        tokens = "".join(d["text"] for n, d, _ in events if n == "token")
        source_id = f"{document['id']}:0"
        assert tokens == final["answer"] and final["answer"].endswith(f" [SourceId: {source_id}; attributed].")
        assert final["citations"] == [source_id] and final["citation_map"][source_id]["attributed"] is True
        excerpt = final["grounding"]["sentences"][-1]
        assert excerpt["status"] == "supported" and excerpt["attributed"] == [source_id]
        assert final["grounding"]["attributed"] == final["grounding"]["claims"] >= 1 and final["action"] == "answered"
        history = mike.get(f"/sessions/{final['session_id']}").json()
        stored = history["messages"][-1]
        assert stored["content"] == final["answer"] and stored["citation_map"] == final["citation_map"]
    page = httpx.get(f"{server.url}/chat/{final['session_id']}/", cookies={"sessionid": server.cookie}, timeout=30)
    assert page.status_code == 200
    assert page.text.count('class="cite cite-by-ragchat"') == final["answer"].count("; attributed]") >= 1
    assert "Attributed by ragchat" in page.text
    assert "attributed]" not in page.text


def test_streamed_failure_ends_with_an_error_event(server, document, fake_ollama):
    fake_ollama.reply("Half an answer that will stop")
    fake_ollama.error_mid_stream(after_tokens=3)
    with client(server, "mike") as mike:
        with mike.stream("POST", "/chat", json={"question": QUESTION}, headers={"Accept": "text/event-stream"}) as r:
            events = sse_events(r)
        name, data, _ = events[-1]
        assert name == "error" and data["code"] == "upstream_unavailable"
        assert data["message"] == "AI service temporarily unavailable." and data["details"]["partial_answer"]
        fake_ollama.reset()
        fake_ollama.refuse_connections()
        try:
            down = mike.post("/chat", json={"question": QUESTION})
        finally:
            fake_ollama.accept_connections()
        body = error(down, 502, "upstream_unavailable")
        assert body["details"]["session_id"] and body["message"] == "AI service temporarily unavailable."


def test_a_routed_question_reaches_its_owner_who_answers_through_the_api(server, document, fake_ollama):
    fake_ollama.reply_citing(1, words=6, prefix="Perhaps.")
    fake_ollama.rating(10)
    with client(server, "mike") as mike:
        asked = mike.post("/chat", json={"question": "Can carry-over days be paid out instead of taken?"}).json()
        assert asked["action"] == "routed", asked
        routed = asked["routed_to"]
        assert routed["owner"] == "Olga" and routed["tag"] == "alpha" and routed["question_id"]
        assert mike.get("/questions").json() == []  # a member owns nothing: nothing routed to him
    with client(server, "nina") as nina:
        error(nina.post(f"/questions/{routed['question_id']}/answer", json={"answer": "Yes."}), 404, "not_found")
    with client(server, "tom") as tom:
        forbidden = error(
            tom.post(f"/questions/{routed['question_id']}/answer", json={"answer": "Yes."}), 404, "not_found"
        )
        absent = error(tom.post("/questions/999999/answer", json={"answer": "Yes."}), 404, "not_found")
        assert forbidden["message"] == absent["message"]
    with client(server, "olga") as olga:
        inbox = olga.get("/questions").json()
        mine = [q for q in inbox if q["id"] == routed["question_id"]]
        assert mine and mine[0]["asker"] == "Mike" and mine[0]["tag"] == "alpha"
        done = olga.post(f"/questions/{routed['question_id']}/answer", json={"answer": "No: they expire on March 31."})
        assert done.status_code == 200 and routed["question_id"] in done.json()["answered"]
        again = olga.post(f"/questions/{routed['question_id']}/answer", json={"answer": "Again."})
        error(again, 409, "not_answerable")
    with client(server, "mike") as mike:
        history = mike.get(f"/sessions/{asked['session_id']}").json()["messages"]
        assert history[-1]["role"] == "owner" and history[-1]["author"] == "Olga"
        assert history[-1]["content"] == "No: they expire on March 31."


def _curl_examples() -> list[str]:
    """The curl commands of docs/api.md's examples, continuation lines joined."""
    api_doc = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    section = api_doc.split("## Examples with curl", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    return [line.strip() for line in block.splitlines() if line.strip().startswith("curl ")]


def test_the_curl_examples_work(server, document, fake_ollama, tmp_path):
    """Every curl line of docs/api.md's examples, run as written (the token, ids, file and tag
    filled in) against the live server: each answers 2xx with JSON or an event stream."""
    import os
    import subprocess

    curls = _curl_examples()
    paths = {re.search(r"/api/v1/[a-z_/A-Z]*", c).group(0) for c in curls}
    assert {"/api/v1/search", "/api/v1/chat", "/api/v1/documents", "/api/v1/sessions", "/api/v1/health"} <= paths
    # Something for the owner to answer: Mike's question, routed to Olga (the owner of Alpha).
    fake_ollama.reply_citing(1, words=6, prefix="Perhaps.")
    fake_ollama.rating(0)
    with client(server, "mike") as mike:
        asked = mike.post("/chat", json={"question": QUESTION}).json()
    assert asked["action"] == "routed", asked
    fake_ollama.reset()
    fake_ollama.reply_citing(1, words=8, prefix="Five days carry over.")
    from ragchat.evaluation.docgen import make_pdf

    (tmp_path / "handbook.pdf").write_bytes(make_pdf(["Readme example: parking is free on Fridays."], title="Handbook"))
    env = {**os.environ, "RAGCHAT": server.url, "TOKEN": server.tokens["olga"]}
    ids: dict[str, str] = {"QUESTION_ID": str(asked["routed_to"]["question_id"])}
    for command in curls:
        command = command.replace("tags=hr", "tags=alpha").replace("tag=hr", "tag=alpha")
        for name, value in ids.items():
            command = command.replace(name, value)
        run = subprocess.run(
            command + ' -w "\n%{http_code}"', shell=True, env=env, cwd=tmp_path, capture_output=True, text=True
        )
        body, _, status = run.stdout.rpartition("\n")
        assert status.startswith("2"), (command, status, body[:500])
        if "text/event-stream" in command:
            assert "event: token" in body and "event: final" in body, body[:500]
            continue
        if status == "204":  # the delete
            assert not body.strip()
            continue
        data = json.loads(body)
        if "-F " in command:  # the upload: later lines use its id
            ids["DOCUMENT_ID"] = data["created"][0]["id"]
            deadline = time.monotonic() + 60
            with client(server, "olga") as olga:
                while olga.get(f"/documents/{ids['DOCUMENT_ID']}").json()["status"] not in ("ready", "failed"):
                    assert time.monotonic() < deadline
                    time.sleep(0.2)
        if command.endswith('"$RAGCHAT/api/v1/chat"'):
            if '"session_id"' in command:  # the continued chat
                assert data["session_id"] == ids["SESSION_ID"], data
            ids.setdefault("SESSION_ID", data["session_id"])


def test_health_has_the_spec_fields_with_details_for_admins(server, document):
    with client(server, None) as anonymous:
        body = anonymous.get("/health").json()
        assert body["status"] in ("ok", "degraded") and body["rag_ok"] is True
        assert body["index_metrics"] is None and body["parts"] is None
    with client(server, "mike") as mike:
        assert mike.get("/health").json()["index_metrics"] is None
    with client(server, "root") as root:
        body = root.get("/health").json()
        assert body["rag_ok"] is True and "chunks" in body["rag_details"]
        assert body["index_metrics"]["total_chunks"] >= 1 and body["index_metrics"]["dimension"] == 384
        assert body["parts"]["database"]["ok"] is True


def test_unknown_addresses_and_wrong_methods_are_the_apis_errors_over_http(server):
    """Through daphne (the middleware's async path; this server runs with DEBUG on, as `make run`)."""
    for who in ("mike", None):
        with client(server, who) as caller:
            assert error(caller.get("/no-such-thing"), 404, "not_found")["message"].endswith("see /api/v1/docs.")
            wrong = caller.delete("/search")
            error(wrong, 405, "method_not_allowed")
            assert wrong.headers["Allow"] == "GET"
    page = httpx.get(server.url + "/no/such/page/", timeout=30)
    assert page.status_code == 404 and page.headers["Content-Type"].startswith("text/html")


def test_docs_page_and_schema_are_served_by_the_app_under_the_csp(server):
    page = httpx.get(server.url + "/api/v1/docs")
    assert page.status_code == 200
    csp = page.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    html = page.text
    # Scripts only from this origin's static files; the settings block is JSON, not script.
    for tag in re.findall(r"<script[^>]*>", html):
        assert 'type="application/json"' in tag or re.search(r'src="/static/', tag), tag
    for asset in re.findall(r'(?:src|href)="(/static/[^"]+)"', html):
        assert httpx.get(server.url + asset).status_code == 200, asset
    schema = httpx.get(server.url + "/api/v1/openapi.json").json()
    paths = set(schema["paths"])
    assert {
        "/api/v1/search",
        "/api/v1/chat",
        "/api/v1/documents",
        "/api/v1/documents/{document_id}",
        "/api/v1/sessions",
        "/api/v1/sessions/{session_id}",
        "/api/v1/questions",
        "/api/v1/questions/{question_id}/answer",
        "/api/v1/health",
    } <= paths
    assert schema["components"]["securitySchemes"]["TokenAuth"]["scheme"] == "bearer"


def test_delete_keeps_the_web_rule(server, fake_ollama):
    with client(server, "olga") as olga:
        # Several files at once, as on the web page: the empty one is refused by name, the other goes on.
        response = olga.post(
            "/documents",
            files=[
                ("files", ("to-delete.txt", b"A short note that will be deleted soon.", "text/plain")),
                ("files", ("blank.txt", b"  \n", "text/plain")),
            ],
            data={"tags": ["alpha"]},
        )
        assert response.status_code == 201, response.text
        [created] = response.json()["created"]
        assert created["filename"] == "to-delete.txt"
        assert response.json()["refused"] == ["blank.txt: this file is empty."]
        with client(server, "mike") as mike:  # a reader may not delete: absent
            error(mike.delete(f"/documents/{created['id']}"), 404, "not_found")
        deadline = time.monotonic() + 60
        while olga.get(f"/documents/{created['id']}").json()["status"] not in ("ready", "failed"):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert olga.delete(f"/documents/{created['id']}").status_code == 204
        error(olga.get(f"/documents/{created['id']}"), 404, "not_found")


# ----------------------------------------------------------------------------------- overhead


async def _ask_websocket(server, session_id: str, question: str) -> float:
    _, status, ms = await ask_websocket(server, session_id, question)
    assert status == "complete"
    return ms


def _ask_http(http: httpx.Client, question: str, session_id: str) -> float:
    started = time.perf_counter()
    response = http.post("/chat", json={"question": question, "session_id": session_id})
    assert response.status_code == 200, response.text
    return (time.perf_counter() - started) * 1000


def test_post_chat_overhead_over_the_websocket(server, document, fake_ollama):
    """Same question, same fake model (zero latency, same answer), one at a time, alternating:
    the time from sending the question to having the whole answer, over the websocket (the web
    chat) and over POST /api/v1/chat (keep-alive connection). Prints and stores the figures."""
    fake_ollama.reply_citing(1, words=30, prefix="Five days.")
    with client(server, "mike") as mike:
        ws_session = mike.post("/chat", json={"question": QUESTION}).json()["session_id"]
        http_session = mike.post("/chat", json={"question": QUESTION}).json()["session_id"]
        samples = 15
        ws_ms, http_ms = [], []
        for i in range(samples + 2):  # two warm-up rounds
            w = asyncio.run(_ask_websocket(server, ws_session, QUESTION))
            h = _ask_http(mike, QUESTION, http_session)
            if i >= 2:
                ws_ms.append(w)
                http_ms.append(h)
    diffs = [h - w for h, w in zip(http_ms, ws_ms)]
    figures = {
        "samples": samples,
        "websocket_p50_ms": round(statistics.median(ws_ms), 1),
        "post_chat_p50_ms": round(statistics.median(http_ms), 1),
        "overhead_p50_ms": round(statistics.median(diffs), 1),
        "websocket_mean_ms": round(statistics.fmean(ws_ms), 1),
        "post_chat_mean_ms": round(statistics.fmean(http_ms), 1),
    }
    print("api-chat-overhead", json.dumps(figures))
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "api-chat-overhead.json").write_text(json.dumps(figures, indent=2))
    assert len(http_ms) == len(ws_ms) == samples
