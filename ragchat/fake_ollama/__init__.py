"""A scriptable Ollama-protocol server, which also speaks the OpenAI-compatible chat API, shipped
with the project for tests, evaluation, benchmarks and demos without a model (see server.py).
Nothing here imports Django.

    fake = FakeOllama().start()      # real HTTP on a free 127.0.0.1 port
    fake.reply("An answer.")         # or reply_with(fn), reply_citing(), rating(), token_delay(), ...
    ... OLLAMA_BASE_URL = fake.url ...
    ... or LLM_PROVIDER=openai, LLM_BASE_URL = fake.url + "/v1" ...
    fake.stop()
"""

from ragchat.fake_ollama.server import (
    CONFIDENCE_MARKER,
    DEFAULT_MODELS,
    DEFAULT_RATING,
    DEFAULT_REPLY,
    SOURCE_HEADER_RE,
    SOURCE_ID_RE,
    FakeOllama,
    RecordedRequest,
    canonical_model_name,
    fake_token_count,
    hashed_embedding,
    split_pieces,
)

__all__ = [
    "CONFIDENCE_MARKER",
    "DEFAULT_MODELS",
    "DEFAULT_RATING",
    "DEFAULT_REPLY",
    "SOURCE_HEADER_RE",
    "SOURCE_ID_RE",
    "FakeOllama",
    "RecordedRequest",
    "canonical_model_name",
    "fake_token_count",
    "hashed_embedding",
    "split_pieces",
]
