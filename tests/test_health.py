"""GET /health: one JSON document, 200 when every required part is up, 503 otherwise."""

import json
from dataclasses import replace

import pytest

from ragchat import runtime
from ragchat.services.types import ChunkRecord

pytestmark = pytest.mark.django_db(transaction=True)

DOC = "5b0e3f1e-8a55-4d53-9d2a-1f6d0d2a7c11"


async def _index_two_chunks():
    service = await runtime.ready_vector_service()
    await service.upsert_chunks(
        [ChunkRecord(DOC, i, "Handbook", f"Vacation policy paragraph {i}.", ("hr",), "default") for i in range(2)]
    )


def test_health_all_up(admin_client, rag_runtime, fake_ollama):
    from asgiref.sync import async_to_sync

    async_to_sync(_index_two_chunks)()
    response = admin_client.get("/health")
    assert response.status_code == 200
    body = json.loads(response.content)
    assert body["status"] == "ok"
    assert body["database"]["ok"] is True
    vector = body["vector_store"]
    assert (vector["ok"], vector["points"], vector["documents"], vector["dimension"], vector["backend"]) == (
        True,
        2,
        1,
        384,
        "edge",
    )
    assert body["embedder"] == {**body["embedder"], "ok": True, "model": "hashing-384", "dimension": 384}
    llm = body["llm"]
    assert llm["reachable"] is True and llm["ok"] is True
    assert llm["provider"] == "ollama" and llm["base_url"] == fake_ollama.url
    assert "llama3.2:latest" in llm["models"]
    assert llm["latency_ms"] >= 0
    # The allowlist an admin configured (RAG_MODELS), each model with its limits.
    assert llm["default_model"] == "llama3.2"
    assert llm["allowlist"] == {
        "llama3.2": {"context_window": 8192, "max_response": 1024},
        "qwen3:8b": {"context_window": 32768, "max_response": 2048},
        "deepseek-r1:32b": {"context_window": 65536, "max_response": 4096},
    }


def test_health_shows_the_openai_compatible_server_and_its_models(admin_client, rag_runtime, fake_ollama, settings):
    """LLM_PROVIDER=openai: the model server's part names the provider, asks its /v1/models, and
    shows the allowlist RAG_MODELS configured."""
    runtime.reset()
    settings.RAG = replace(
        settings.RAG,
        llm_provider="openai",
        llm_base_url=f"{fake_ollama.url}/v1",
        rag_models="qwen2.5-0.5b-instruct=4096/512",
        chat_model="qwen2.5-0.5b-instruct",
    )
    fake_ollama.models(["llama3.2"])
    body = json.loads(admin_client.get("/health").content)
    llm = body["llm"]
    assert (llm["provider"], llm["base_url"], llm["reachable"]) == ("openai", f"{fake_ollama.url}/v1", True)
    assert llm["missing"] == ["qwen2.5-0.5b-instruct"] and body["status"] == "degraded"
    assert llm["allowlist"] == {"qwen2.5-0.5b-instruct": {"context_window": 4096, "max_response": 512}}
    assert fake_ollama.requests_to("/v1/models") and not fake_ollama.requests_to("/api/tags")
    fake_ollama.models(["qwen2.5-0.5b-instruct"])
    assert json.loads(admin_client.get("/health").content)["status"] == "ok"


def test_health_ollama_down_is_degraded_but_up(admin_client, rag_runtime, fake_ollama):
    """Embedded mode works without Ollama (answers degrade to cited passages), so 200."""
    fake_ollama.refuse_connections()
    response = admin_client.get("/health")
    assert response.status_code == 200
    body = json.loads(response.content)
    assert body["status"] == "degraded"
    assert body["llm"]["reachable"] is False and body["llm"]["ok"] is False


def test_health_ollama_required_and_down_is_503(admin_client, rag_runtime, fake_ollama, settings):
    settings.RAGCHAT_REQUIRE_OLLAMA = True
    fake_ollama.refuse_connections()
    response = admin_client.get("/health")
    assert response.status_code == 503
    assert json.loads(response.content)["status"] == "down"


def test_health_model_missing_is_reported(admin_client, rag_runtime, fake_ollama):
    fake_ollama.models(["qwen3:8b"])
    body = json.loads(admin_client.get("/health").content)
    assert body["llm"]["reachable"] is True
    assert body["llm"]["missing"] == ["llama3.2"]
    assert body["status"] == "degraded"


def test_health_vector_store_mismatch_is_503(admin_client, rag_runtime, fake_ollama, settings, tmp_path):
    """A collection built with another embedder: the store is down, and /health says why."""
    from asgiref.sync import async_to_sync

    async_to_sync(_index_two_chunks)()
    runtime.reset()
    settings.RAG = replace(settings.RAG, embedding_backend="ollama", embedding_model="nomic-embed-text")
    response = admin_client.get("/health")
    assert response.status_code == 503
    body = json.loads(response.content)
    assert body["vector_store"]["ok"] is False
    assert "CollectionMismatchError" in body["vector_store"]["error"]
    assert "hashing-384" in body["vector_store"]["error"]


def test_health_reports_the_cross_encoder_only_when_configured(admin_client, rag_runtime, fake_ollama, settings):
    assert "cross_encoder" not in json.loads(admin_client.get("/health").content)
    runtime.reset()
    settings.RAG = replace(settings.RAG, rag_reranker="no-such-org/no-such-cross-encoder")
    body = json.loads(admin_client.get("/health").content)
    assert body["cross_encoder"] == {"model": "no-such-org/no-such-cross-encoder", "status": "not loaded yet"}
    assert runtime.rag_service().reranker is runtime.reranker()


@pytest.mark.parametrize("who", ["anonymous", "member", "staff"])
def test_health_shows_only_the_status_to_everyone_but_admins(client, rag_runtime, fake_ollama, django_user_model, who):
    """Model names, counts and URLs are for admins; anyone else (a load balancer's probe too) gets
    the verdict and the status code alone."""
    if who != "anonymous":
        user = django_user_model.objects.create_user(who, password="pw-12345-long", is_staff=(who == "staff"))
        client.force_login(user)
    response = client.get("/health")
    body = json.loads(response.content)
    assert response.status_code == 200
    assert body == {"status": "degraded"} or body == {"status": "ok"}
    assert rag_runtime.chat_model not in response.content.decode()
