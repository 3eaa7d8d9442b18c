"""LLM_PROVIDER=openai end to end: a daphne process configured only by its environment
(LLM_PROVIDER, LLM_BASE_URL, LLM_API_KEY, RAG_MODELS, CHAT_MODEL) answers through the test server's
OpenAI-compatible chat API, over the JSON API (whole answer and server-sent events) and the chat
websocket, with citations, grounding and the model's rating; `/health` shows admins the provider
and the configured models."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.api.live import ask_websocket, client, seeded_api_server, sse_events, upload
from tests.api.test_api_live import DOC_TEXT, QUESTION, SETUP

SMALL = "qwen2.5-0.5b-instruct"
API_KEY = "sk-local-test"


@pytest.fixture(scope="module")
def server(tmp_path_factory, ollama_server):
    server = seeded_api_server(
        tmp_path_factory.mktemp("openai-live"),
        ollama_url="http://127.0.0.1:9",  # nothing listens there: every answer must come through /v1
        setup=SETUP,
        extra_env={
            "LLM_PROVIDER": "openai",
            "LLM_BASE_URL": f"{ollama_server.url}/v1",
            "LLM_API_KEY": API_KEY,
            "RAG_MODELS": f"{SMALL}=4096/512, llama3.2=8192/1024",
            "CHAT_MODEL": SMALL,
            "RAGCHAT_API_CHAT_RATE": "1000/m",
        },
    )
    yield server
    server.stop()


@pytest.fixture
def model_server(fake_ollama):
    """The test server as an OpenAI-compatible one serving the small model, wanting the key."""
    fake_ollama.models([SMALL])
    fake_ollama.require_api_key(API_KEY)
    return fake_ollama


@pytest.fixture(scope="module")
def document(server):
    with client(server, "olga") as olga:
        return upload(olga, "carry-over.txt", DOC_TEXT, ["alpha"])


def test_the_json_api_answers_through_the_openai_protocol(server, document, model_server):
    model_server.reply_citing(1, words=8, prefix="Five days carry over.")
    model_server.rating(90)
    with client(server, "mike") as mike:
        response = mike.post("/chat", json={"question": QUESTION})
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["model"] == SMALL and answer["answer"].startswith(
            f"Five days carry over [SourceId: {document['id']}:0; attributed]."  # the model's text, cited by ragchat
        )
        assert answer["citations"] == [f"{document['id']}:0"] and answer["action"] == "answered"
        assert answer["confidence"]["llm"] == 90  # the rating call went the same way
        assert answer["grounding"]["sentences"][-1]["status"] == "supported"
        # A model RAG_MODELS does not list is refused with the configured list; a listed one is
        # taken under any of its names.
        refused = mike.post("/chat", json={"question": QUESTION, "model": "qwen3:8b"})
        assert refused.status_code == 422 and refused.json()["details"]["allowed"] == ["llama3.2", SMALL]
        chosen = mike.post("/chat", json={"question": QUESTION, "model": f"{SMALL}:latest"})
        assert chosen.status_code == 200 and chosen.json()["model"] == SMALL, chosen.text
    chats = model_server.requests_to("/v1/chat/completions")
    assert len(chats) == 4  # two answers, each followed by its rating
    assert {r.body["model"] for r in chats} == {SMALL} and chats[0].body["max_tokens"] == 512
    assert model_server.requests_to("/api/chat") == [] and model_server.requests_to("/v1/models")


def test_server_sent_events_stream_token_by_token(server, document, model_server):
    model_server.reply_citing(1, words=20, prefix="Streaming answer:")
    model_server.token_delay(0.02)
    with client(server, "mike") as mike:
        with mike.stream("POST", "/chat", json={"question": QUESTION}, headers={"Accept": "text/event-stream"}) as r:
            assert r.status_code == 200
            events = sse_events(r)
    names = [n for n, _, _ in events]
    assert names[0] == "start" and names[-1] == "final", (events[-1], server.log_text()[-3000:])
    tokens = [(d["text"], at) for n, d, at in events if n == "token"]
    assert len(tokens) >= 20 and tokens[-1][1] - tokens[0][1] > 0.2
    final = events[-1][1]
    assert "".join(t for t, _ in tokens) == final["answer"] and final["citations"]


def test_a_failing_server_is_the_apis_upstream_error(server, document, model_server):
    model_server.reply("Half an answer that will stop")
    model_server.error_mid_stream(after_tokens=3, message="slot unavailable")
    with client(server, "mike") as mike:
        with mike.stream("POST", "/chat", json={"question": QUESTION}, headers={"Accept": "text/event-stream"}) as r:
            events = sse_events(r)
    name, data, _ = events[-1]
    assert name == "error" and data["code"] == "upstream_unavailable" and data["details"]["partial_answer"]


def test_the_chat_websocket_answers_through_the_openai_protocol(server, document, model_server):
    model_server.reply_citing(1, words=8, prefix="Over the websocket.")
    with client(server, "mike") as mike:
        session_id = mike.post("/chat", json={"question": QUESTION}).json()["session_id"]
        final, _, _ = asyncio.run(ask_websocket(server, session_id, "And how many days carry over?"))
        assert 'data-status="complete"' in final and "Over the websocket." in final
        assert 'class="cite-marker"' in final
        stored = mike.get(f"/sessions/{session_id}").json()["messages"][-1]
        assert stored["content"].startswith("Over the websocket.") and stored["citations"]
    assert len(model_server.requests_to("/v1/chat/completions")) == 4  # two answers, two ratings


def test_health_shows_admins_the_provider_and_the_configured_models(server, model_server):
    with client(server, "root") as root:
        llm = root.get("/health").json()["parts"]["llm"]
    assert llm["provider"] == "openai" and llm["base_url"] == f"{model_server.url}/v1"
    assert llm["ok"] is True and llm["models"] == [f"{SMALL}:latest"]
    assert llm["default_model"] == SMALL
    assert llm["allowlist"] == {
        SMALL: {"context_window": 4096, "max_response": 512},
        "llama3.2": {"context_window": 8192, "max_response": 1024},
    }
    with client(server, "mike") as mike:  # not an admin: no parts
        assert mike.get("/health").json()["parts"] is None
    page = httpx.get(f"{server.url}/health", headers={"Cookie": f"sessionid={server.cookie}"}, timeout=30)
    assert page.json() == {"status": "ok"}  # mike's web session: the verdict alone
