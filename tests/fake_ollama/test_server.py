"""The fake Ollama server speaks the real protocol: langchain-ollama and the ollama client, unmodified,
work against it over real HTTP."""

from __future__ import annotations

import json
import math
import socket
import time

import httpx
import ollama
import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_ollama import ChatOllama, OllamaEmbeddings

from ragchat.fake_ollama import DEFAULT_REPLY, FakeOllama

DOC_A = "550e8400-e29b-41d4-a716-446655440000"
DOC_B = "6ba7b810-9dad-41d1-80b4-00c04fd430c8"

SYSTEM_WITH_CONTEXT = f"""You are a helpful assistant.
CONTEXT (each section has a SourceId for citation):
[SourceId: {DOC_A}:0]
[Document: handbook.pdf]
[Page: 3] [Section: Leave]
---
Employees get twenty five days of paid vacation per year.
---
[SourceId: {DOC_B}:4]
[Document: travel.md]
[Page: N/A] [Section: N/A]
---
Travel expenses are reimbursed within thirty days.
---
"""


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


async def test_chat_ollama_streams_scripted_reply_in_pieces(fake_ollama: FakeOllama) -> None:
    fake_ollama.reply("Paid leave is twenty five days.")
    chat = ChatOllama(model="llama3.2", base_url=fake_ollama.url, num_predict=64)
    chunks = [c async for c in chat.astream([HumanMessage("How much leave?")])]
    texts = [c.content for c in chunks if c.content]
    assert "".join(texts) == "Paid leave is twenty five days."
    assert len(texts) > 5  # streamed piece by piece, not as one blob
    final = next(c for c in chunks if c.usage_metadata)  # langchain may add an empty last chunk
    assert final.usage_metadata["input_tokens"] > 0
    assert final.usage_metadata["output_tokens"] == len(texts)
    assert final.response_metadata["done_reason"] == "stop"
    body = fake_ollama.requests_to("/api/chat")[0].body
    assert body["stream"] is True and body["options"]["num_predict"] == 64


async def test_chat_ollama_invoke_non_streaming(fake_ollama: FakeOllama) -> None:
    fake_ollama.reply("One.", "Two.")
    chat = ChatOllama(model="llama3.2", base_url=fake_ollama.url)
    assert (await chat.ainvoke("a")).content == "One."
    assert (await chat.ainvoke("b")).content == "Two."
    assert (await chat.ainvoke("c")).content == "Two."  # the last reply sticks


def test_ollama_client_non_stream_chat_and_generate(fake_ollama: FakeOllama) -> None:
    fake_ollama.reply("Hello world")
    client = ollama.Client(host=fake_ollama.url)
    response = client.chat(model="llama3.2", messages=[{"role": "user", "content": "hi"}], stream=False)
    assert response.message.content == "Hello world"
    assert response.done is True and response.done_reason == "stop"
    assert response.prompt_eval_count > 0 and response.eval_count == 3
    generated = client.generate(model="llama3.2", prompt="Say hello", stream=False)
    assert generated.response == "Hello world"
    assert generated.prompt_eval_count > 0


def test_generate_with_num_predict_zero_counts_prompt_tokens(fake_ollama: FakeOllama) -> None:
    text = "Employees get twenty five days of paid vacation per year."
    response = httpx.post(
        f"{fake_ollama.url}/api/generate",
        json={
            "model": "llama3.2",
            "prompt": text,
            "raw": True,
            "stream": False,
            "options": {"num_predict": 0},
        },
    )
    data = response.json()
    assert data["response"] == ""
    assert data["prompt_eval_count"] == fake_ollama.count_tokens(text)
    assert data["done"] is True and data["eval_count"] == 0


def test_streaming_ndjson_over_chunked_http(fake_ollama: FakeOllama) -> None:
    fake_ollama.reply("a b")
    with httpx.stream("POST", f"{fake_ollama.url}/api/generate", json={"model": "llama3.2", "prompt": "x"}) as response:
        assert response.headers["transfer-encoding"] == "chunked"
        assert response.headers["content-type"] == "application/x-ndjson"
        lines = [json.loads(line) for line in response.iter_lines() if line]
    assert [line["response"] for line in lines[:-1]] == ["a", " ", "b"]
    assert lines[-1]["done"] is True and "prompt_eval_count" in lines[-1]


def test_reply_citing_uses_source_ids_from_system_prompt(fake_ollama: FakeOllama) -> None:
    fake_ollama.reply_citing(n=2)
    chat = ChatOllama(model="llama3.2", base_url=fake_ollama.url)
    answer = chat.invoke([SystemMessage(SYSTEM_WITH_CONTEXT), HumanMessage("Leave and travel?")]).content
    assert f"[SourceId: {DOC_A}:0]" in answer and f"[SourceId: {DOC_B}:4]" in answer
    assert "twenty five days" in answer  # the cited chunk's own words, for coverage
    fake_ollama.reply_citing(n=1)
    answer = chat.invoke([SystemMessage(SYSTEM_WITH_CONTEXT), HumanMessage("Leave?")]).content
    assert DOC_A in answer and DOC_B not in answer


def test_reply_from_context_reads_words_of_the_same_meaning(fake_ollama: FakeOllama) -> None:
    """The extracting model answers with the sentence that answers the question, also when it says
    "at least ... characters" of a question about the "minimum length", and declines a question
    that shares one word with the context."""
    system = SYSTEM_WITH_CONTEXT.replace(
        "Travel expenses are reimbursed within thirty days.",
        "Travel expenses are reimbursed within thirty days. Passwords must have at least 14 characters.",
    )
    fake_ollama.reply_from_context(cite=True)
    chat = ChatOllama(model="llama3.2", base_url=fake_ollama.url)
    answer = chat.invoke([SystemMessage(system), HumanMessage("What is the minimum length of a password?")]).content
    assert answer == f"Passwords must have at least 14 characters [SourceId: {DOC_B}:4]."
    answer = chat.invoke([SystemMessage(system), HumanMessage("How many days of vacation?")]).content
    assert answer.startswith("Employees get twenty five days") and DOC_A in answer
    answer = chat.invoke([SystemMessage(system), HumanMessage("Which password manager do we use?")]).content
    assert "enough information" in answer


def test_malformed_ids_reply_has_no_valid_source_id(fake_ollama: FakeOllama) -> None:
    import re

    text = fake_ollama.reply_text_with_malformed_ids()
    chat = ChatOllama(model="llama3.2", base_url=fake_ollama.url)
    answer = chat.invoke("q").content
    assert answer == text
    assert "SourceId" in answer
    assert re.findall(r"\[SourceId:\s*([a-f0-9-]{36}:\d+)\]", answer) == []


def test_rating_answers_the_confidence_prompt_only(fake_ollama: FakeOllama) -> None:
    fake_ollama.reply("The answer.")
    fake_ollama.rating(85)
    chat = ChatOllama(model="llama3.2", base_url=fake_ollama.url)
    assert chat.invoke("Question?").content == "The answer."
    prompt = "Evaluate...\nRate the support level from 0-100:\nRespond with ONLY a number"
    assert chat.invoke(prompt).content == "85"
    assert chat.invoke("Question again?").content == "The answer."


def test_unknown_model_is_404_like_real_ollama(fake_ollama: FakeOllama) -> None:
    response = httpx.post(f"{fake_ollama.url}/api/chat", json={"model": "mistral", "messages": [], "stream": False})
    assert response.status_code == 404
    assert response.json() == {"error": 'model "mistral" not found, try pulling it first'}
    chat = ChatOllama(model="mistral", base_url=fake_ollama.url)
    with pytest.raises(ollama.ResponseError) as info:
        chat.invoke("hi")
    assert info.value.status_code == 404


def test_tags_show_version(fake_ollama: FakeOllama) -> None:
    client = ollama.Client(host=fake_ollama.url)
    assert [m.model for m in client.list().models] == ["llama3.2:latest", "qwen3:8b", "nomic-embed-text:latest"]
    raw = httpx.get(f"{fake_ollama.url}/api/tags").json()
    assert raw["models"][0]["name"] == "llama3.2:latest"
    show = client.show("qwen3:8b")
    assert show.modelinfo["qwen3.context_length"] == 40960
    assert "thinking" in show.capabilities
    assert client.show("nomic-embed-text").modelinfo["nomic-bert.embedding_length"] == 768
    assert httpx.get(f"{fake_ollama.url}/api/version").json()["version"]
    fake_ollama.models(["llama3.2", "deepseek-r1:32b"])
    assert [m.model for m in client.list().models] == ["llama3.2:latest", "deepseek-r1:32b"]


async def test_ollama_embeddings_are_deterministic_normalised_and_meaningful(
    fake_ollama: FakeOllama,
) -> None:
    embeddings = OllamaEmbeddings(model="nomic-embed-text", base_url=fake_ollama.url)
    docs = [
        "search_document: Employees get twenty five days of paid vacation per year.",
        "search_document: The cafeteria serves lunch from noon until two.",
    ]
    vectors = await embeddings.aembed_documents(docs)
    query = await embeddings.aembed_query("search_query: how many vacation days do employees get")
    assert len(vectors) == 2 and len(query) == 768
    assert math.isclose(math.sqrt(sum(v * v for v in query)), 1.0, rel_tol=1e-9)
    assert cosine(query, vectors[0]) > cosine(query, vectors[1]) + 0.2
    assert await embeddings.aembed_documents(docs) == vectors  # deterministic
    assert fake_ollama.requests_to("/api/embed")[0].body["input"] == docs  # prefixes recorded
    fake_ollama.embedding_dimension(384)
    assert len(embeddings.embed_query("x")) == 384
    single = httpx.post(f"{fake_ollama.url}/api/embed", json={"model": "nomic-embed-text", "input": "one text"}).json()
    assert len(single["embeddings"]) == 1


def test_reasoning_model_thinking_lands_in_answer_unless_think_false(fake_ollama: FakeOllama) -> None:
    fake_ollama.reply("Forty two.")
    default = ChatOllama(model="qwen3:8b", base_url=fake_ollama.url)
    assert "<think>" in default.invoke("q").content
    off = ChatOllama(model="qwen3:8b", base_url=fake_ollama.url, reasoning=False)
    assert off.invoke("q").content == "Forty two."
    on = ChatOllama(model="qwen3:8b", base_url=fake_ollama.url, reasoning=True)
    message = on.invoke("q")
    assert message.content == "Forty two." and message.additional_kwargs["reasoning_content"]


def test_fail_with_status_then_recovers(fake_ollama: FakeOllama) -> None:
    fake_ollama.fail_with(status=503, times=2)
    chat = ChatOllama(model="llama3.2", base_url=fake_ollama.url)
    for _ in range(2):
        with pytest.raises(ollama.ResponseError) as info:
            chat.invoke("q")
        assert info.value.status_code == 503
    assert chat.invoke("q").content


def test_first_token_delay_and_stall_are_real_waits(fake_ollama: FakeOllama) -> None:
    fake_ollama.reply("one two three")
    fake_ollama.first_token_delay(0.3)
    fake_ollama.stall_after(2, 0.3)
    started = time.monotonic()
    with httpx.stream(
        "POST",
        f"{fake_ollama.url}/api/chat",
        json={"model": "llama3.2", "messages": [{"role": "user", "content": "q"}]},
    ) as response:
        arrivals = [time.monotonic() - started for line in response.iter_lines() if line]
    assert arrivals[0] >= 0.3
    # The stall sits between piece 2 and piece 3: piece 3 cannot arrive before both waits have
    # passed (a late read of piece 2 on a loaded machine does not shorten what the server waited).
    assert arrivals[2] >= 0.6 and arrivals[1] < arrivals[2]


def test_refuse_connections_really_refuses_then_recovers(fake_ollama: FakeOllama) -> None:
    port = fake_ollama.port
    with httpx.Client() as client:  # a pooled keep-alive connection must not survive either
        assert client.get(f"{fake_ollama.url}/api/version").status_code == 200
        fake_ollama.refuse_connections()
        with pytest.raises(httpx.TransportError):
            client.get(f"{fake_ollama.url}/api/version")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    fake_ollama.accept_connections()
    assert fake_ollama.port == port
    assert httpx.get(f"{fake_ollama.url}/api/version").status_code == 200


def test_requests_are_recorded_and_reset(fake_ollama: FakeOllama) -> None:
    httpx.get(f"{fake_ollama.url}/api/tags")
    assert [(r.method, r.path) for r in fake_ollama.requests] == [("GET", "/api/tags")]
    fake_ollama.reply("custom")
    fake_ollama.reset()
    assert fake_ollama.requests == []
    chat = ChatOllama(model="llama3.2", base_url=fake_ollama.url)
    assert chat.invoke("q").content == "This is the fake model's answer."


def test_stream_pieces_and_stream_end_callback(fake_ollama: FakeOllama) -> None:
    """The public hooks the benchmark scripts: its own chunking, and a note when a stream ended."""
    import threading

    ended: list[str] = []
    fake_ollama.reply("one two three")
    fake_ollama.stream_pieces(lambda text: [w + " " for w in text.split()])
    fake_ollama.on_stream_end(lambda: ended.append(threading.current_thread().name))
    with httpx.stream(
        "POST",
        f"{fake_ollama.url}/api/chat",
        json={"model": "llama3.2", "messages": [{"role": "user", "content": "q"}]},
    ) as response:
        lines = [json.loads(line) for line in response.iter_lines() if line]
    assert [line["message"]["content"] for line in lines if not line["done"]] == ["one ", "two ", "three "]
    # The server's thread runs the callback after writing the last line: the client may read it first.
    deadline = time.monotonic() + 5
    while not ended and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(ended) == 1
    fake_ollama.reset()
    assert ChatOllama(model="llama3.2", base_url=fake_ollama.url).invoke("q").content == DEFAULT_REPLY
    assert len(ended) == 1  # reset() drops the callback


async def test_a_burst_of_connections_is_taken_at_once_as_ollama_takes_it(fake_ollama: FakeOllama) -> None:
    """Ollama (Go) listens with the kernel's whole queue (somaxconn). With a short listen queue,
    connections beyond it lose their SYN and the kernel sends it again only after a second: a burst
    of 200 questions measured a model that seemed to take a second to answer a tenth of them.
    Each connection's own count of retransmissions (the kernel's TCP_INFO, tcpi_total_retrans)
    says whether its SYN was sent again: not a clock, which a loaded machine stretches anyway."""
    import asyncio
    import socket
    import struct
    from urllib.parse import urlsplit

    url = urlsplit(fake_ollama.url)

    async def connect() -> int:
        _, writer = await asyncio.open_connection(url.hostname, url.port)
        info = writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        writer.close()
        return struct.unpack_from("I", info, TCP_INFO_TOTAL_RETRANS)[0]

    resent = await asyncio.gather(*(connect() for _ in range(400)))
    assert sum(resent) == 0, f"{sum(r > 0 for r in resent)} of 400 connections had their SYN sent again"


# struct tcp_info (linux/tcp.h): eight one-byte fields, then 32-bit ones; tcpi_total_retrans is the 24th.
TCP_INFO_TOTAL_RETRANS = 8 + 23 * 4


# ---- the OpenAI-compatible chat API ------------------------------------------------------------


def _sse_data(text: str) -> list[str]:
    return [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]


def test_openai_chat_streams_server_sent_events_with_usage_when_asked(fake_ollama: FakeOllama) -> None:
    """The shape vLLM and llama.cpp's server send: a role delta, one delta per piece, the finish
    reason, a usage chunk with no choices (only with `stream_options.include_usage`), `[DONE]`."""
    fake_ollama.reply("Twenty five days.")
    request = {"model": "llama3.2", "stream": True, "messages": [{"role": "user", "content": "Leave?"}]}
    with httpx.Client(base_url=fake_ollama.url) as http:
        plain = http.post("/v1/chat/completions", json=request)
        counted = http.post("/v1/chat/completions", json={**request, "stream_options": {"include_usage": True}})
        models = http.get("/v1/models").json()
    assert plain.headers["content-type"] == "text/event-stream"
    events = _sse_data(plain.text)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "Twenty five days."
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and "usage" not in chunks[-1]
    usage = json.loads(_sse_data(counted.text)[-2])
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 5
    assert [m["id"] for m in models["data"]] == ["llama3.2:latest", "qwen3:8b", "nomic-embed-text:latest"]


def test_openai_chat_whole_answers_and_errors(fake_ollama: FakeOllama) -> None:
    fake_ollama.reply("one two three")
    with httpx.Client(base_url=fake_ollama.url) as http:
        whole = http.post(
            "/v1/chat/completions",
            json={"model": "llama3.2", "max_tokens": 3, "messages": [{"role": "user", "content": "Count"}]},
        ).json()
        assert whole["choices"][0]["message"] == {"role": "assistant", "content": "one two"}
        assert whole["choices"][0]["finish_reason"] == "length" and whole["usage"]["completion_tokens"] == 3
        missing = http.post("/v1/chat/completions", json={"model": "mistral", "messages": []})
        assert missing.status_code == 404 and "mistral" in missing.json()["error"]["message"]
        fake_ollama.fail_with(503, times=1)
        busy = http.post("/v1/chat/completions", json={"model": "llama3.2", "messages": []})
        assert busy.status_code == 503 and busy.json()["error"]["type"] == "server_error"
        fake_ollama.require_api_key("k")
        assert http.get("/v1/models").status_code == 401
        assert http.get("/v1/models", headers={"Authorization": "Bearer k"}).status_code == 200
        assert http.get("/api/tags").status_code == 200  # Ollama's own API wants no key
