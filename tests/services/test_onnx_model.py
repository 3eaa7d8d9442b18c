"""The local model on ONNX Runtime, as the install exported it: its vectors against the torch
model's (stored in minilm_reference.json, which tests/export checks against sentence-transformers),
its token counts, the int8 file's vectors independent of the batch a text is in, and the model's
child process. The export itself, which needs torch, is tested in tests/export."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from ragchat.services import onnx_model
from ragchat.services.config import RAGSettings
from ragchat.services.embeddings import LocalEmbedder, build_embedder

pytestmark = pytest.mark.slow

REFERENCE = json.loads((Path(__file__).parent / "minilm_reference.json").read_text())
TEXTS = REFERENCE["texts"]


@pytest.fixture(scope="module")
def exported() -> Path:
    """The folder `make install` exported both files and the tokenizer into."""
    for runtime in onnx_model.RUNTIMES:
        onnx_model.model_path(None, runtime)
    return onnx_model.default_dir()


async def test_onnx_vectors_match_the_torch_model(exported):
    reference = np.array(REFERENCE["vectors"])
    fp32 = np.array(await LocalEmbedder(runtime="onnx", onnx_dir=str(exported)).embed_documents(TEXTS))
    int8 = np.array(await LocalEmbedder(runtime="onnx-int8", onnx_dir=str(exported)).embed_documents(TEXTS))
    assert fp32.shape == int8.shape == reference.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(int8, axis=1), 1.0, atol=1e-4)
    assert (fp32 * reference).sum(axis=1).min() > 0.9999
    assert (int8 * reference).sum(axis=1).min() > 0.97
    # Still the model's meaning, not its words: "holiday" finds "vacation".
    query = np.array(await LocalEmbedder(runtime="onnx-int8", onnx_dir=str(exported)).embed_query("days of holiday?"))
    assert query @ int8[0] > query @ int8[1]


async def test_onnx_counts_tokens_like_the_torch_tokenizer(exported):
    onnx = LocalEmbedder(runtime="onnx-int8", onnx_dir=str(exported))
    counts = REFERENCE["token_counts"]
    assert len(counts) == len(REFERENCE["count_texts"]) > len(TEXTS)
    for text, count in zip(REFERENCE["count_texts"], counts, strict=True):
        assert onnx.count_tokens(text) == count


def test_a_folder_without_the_export_says_how_to_make_it(tmp_path):
    with pytest.raises(onnx_model.ModelNotExported, match="make install"):
        onnx_model.model_path(str(tmp_path), "onnx-int8")
    with pytest.raises(ValueError, match="EMBEDDING_RUNTIME"):
        onnx_model.model_path(str(tmp_path), "torch")


async def test_int8_gives_a_text_the_same_vector_in_any_batch(exported):
    embedder = LocalEmbedder(runtime="onnx-int8", onnx_dir=str(exported), batch_size=32)
    together = np.array(await embedder.embed_documents(TEXTS))
    alone = np.array([await embedder.embed_query(t) for t in TEXTS])
    assert np.abs(together - alone).max() < 1e-5


async def test_concurrent_callers_share_the_models_cores_and_get_the_same_vectors(exported):
    """Two files ingested at once call the model together: their runs go through one pool of one
    run per core, each in a 1-thread session, and every text gets the vector it gets alone."""
    import asyncio

    model = onnx_model.load(str(exported), "onnx-int8", max_tokens=256, batch_size=32)
    alone = np.array(model.encode(TEXTS))
    seen: set[str] = set()
    session_run = model.session.run

    def spy(*args, **kwargs):
        seen.add(threading.current_thread().name)
        return session_run(*args, **kwargs)

    model.session.run = spy
    try:
        results = await asyncio.gather(*(asyncio.to_thread(model.encode, TEXTS[::-1] * 3) for _ in range(4)))
    finally:
        del model.session.run
    for got in results:
        assert np.abs(np.array(got)[: len(TEXTS)][::-1] - alone).max() < 1e-5
    assert seen and all(name.startswith("onnx-model") for name in seen)
    assert len(seen) <= onnx_model._cores()
    assert model.session.get_session_options().intra_op_num_threads == 1


async def test_the_model_runs_in_a_child_process_of_its_own(exported):
    """The server's embeddings never wait for its GIL: a child process runs the model and gives the
    same vectors as the model in this process, to callers at once, and comes back if it dies."""
    import asyncio
    import os

    embedder = LocalEmbedder(runtime="onnx-int8", onnx_dir=str(exported), batch_size=32)
    in_process = np.array(onnx_model.load(str(exported), "onnx-int8", max_tokens=256, batch_size=32).encode(TEXTS))
    got = np.array(await embedder.embed_documents(TEXTS))
    child = embedder.process.pid
    assert child is not None and child != os.getpid()
    assert np.abs(got - in_process).max() < 1e-6
    together = await asyncio.gather(*(embedder.embed_query(t) for t in TEXTS), embedder.embed_documents(TEXTS))
    assert np.abs(np.array(together[: len(TEXTS)]) - in_process).max() < 1e-6
    assert await embedder.embed_documents([]) == []

    os.kill(child, 9)  # a crash: the next request starts a new child and is answered
    os.waitpid(child, 0)
    again = np.array(await embedder.embed_documents(TEXTS[:1]))
    assert embedder.process.pid not in (None, child)
    assert np.abs(again - in_process[:1]).max() < 1e-6


def test_the_runtime_is_a_setting(tmp_path):
    embedder = build_embedder(RAGSettings(embedding_runtime="onnx", embedding_onnx_dir=str(tmp_path)))
    assert embedder.inner.inner.runtime == "onnx" and embedder.model_name == "all-MiniLM-L6-v2"
    assert build_embedder(RAGSettings()).inner.inner.runtime == "onnx-int8"
    with pytest.raises(ValueError, match="EMBEDDING_RUNTIME"):
        build_embedder(RAGSettings(embedding_runtime="tensorflow"))


def test_a_broken_model_file_is_an_embedding_error(exported, tmp_path):
    from ragchat.services.errors import EmbeddingError

    version = tmp_path / f"v{onnx_model.EXPORT_VERSION}"
    version.mkdir()
    (version / onnx_model.MODEL_FILE["onnx"]).write_bytes(b"not a model")
    shutil.copyfile(onnx_model.model_path(None, "onnx").parent / onnx_model.TOKENIZER_FILE, version / "tokenizer.json")
    embedder = LocalEmbedder(runtime="onnx", onnx_dir=str(tmp_path))
    with pytest.raises(EmbeddingError, match="local embedding failed: the embedding model could not load"):
        embedder._encode(["hello"])


def test_the_sessions_run_the_layer_norms_unfused(exported, tmp_path):
    """The exported files hold each layer's residual sum and layer norm as standard operators, and
    the graph each session runs after ONNX Runtime's own optimizations still does: twelve
    LayerNormalization nodes, one after each attention and each feed-forward block, and no
    SkipLayerNormalization (whose CPU kernel made them 30% of a query's embedding)."""
    import onnx

    for runtime in ("onnx", "onnx-int8"):
        path = onnx_model.model_path(str(exported), runtime)
        stored = [node.op_type for node in onnx.load(str(path)).graph.node]
        copy = tmp_path / f"{runtime}-running.onnx"
        onnx_model.OnnxModel._open_session(path, optimized_copy=copy)
        running = [node.op_type for node in onnx.load(str(copy)).graph.node]
        for ops in (stored, running):
            assert "SkipLayerNormalization" not in ops, runtime
            assert ops.count("LayerNormalization") == 12, runtime
