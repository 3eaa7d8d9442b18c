"""The ONNX export of the local model (ragchat/services/onnx_export.py), in the environment that has
torch: exported from the packaged weights into an empty folder by several callers at once, checked
against the torch model, and the reference the main suite compares the installed files with
(tests/services/minilm_reference.json) still sentence-transformers' own vectors and counts."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from ragchat.services import onnx_export, onnx_model
from ragchat.services.onnx_model import OnnxModel
from tests.export import reference


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """Both files exported into a new folder by four callers at once: one export, no torn file."""
    folder = tmp_path_factory.mktemp("onnx")
    version = folder / f"v{onnx_model.EXPORT_VERSION}"
    paths: list[Path] = []
    errors: list[BaseException] = []

    def call(runtime: str) -> None:
        try:
            target = version / onnx_model.MODEL_FILE[runtime]
            paths.append(onnx_export.export_model(target, quantized=runtime == "onnx-int8"))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=call, args=(rt,)) for rt in ("onnx", "onnx-int8", "onnx-int8", "onnx")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len({str(p) for p in paths}) == 2
    assert sorted(p.name for p in version.glob("*.onnx")) == sorted(onnx_model.MODEL_FILE.values())
    assert (version / onnx_model.TOKENIZER_FILE).is_file()
    assert not list(version.glob("*.tmp"))
    for runtime in onnx_model.RUNTIMES:  # what the app asks for is there
        assert onnx_model.model_path(str(folder), runtime) == version / onnx_model.MODEL_FILE[runtime]
    return version


def test_the_export_passes_its_own_check_against_torch(exported):
    onnx_export.check(exported)  # raises SystemExit below the floors


def test_onnx_vectors_and_counts_match_sentence_transformers(exported):
    texts, count_texts = reference.TEXTS, reference.COUNT_TEXTS
    torch_side = reference.compute(texts, count_texts)
    expected = np.array(torch_side["vectors"])
    fp32 = np.array(OnnxModel(exported / onnx_model.MODEL_FILE["onnx"], max_tokens=256).encode(texts))
    int8_model = OnnxModel(exported / onnx_model.MODEL_FILE["onnx-int8"], max_tokens=256, quantized=True)
    int8 = np.array(int8_model.encode(texts))
    assert (fp32 * expected).sum(axis=1).min() > 0.9999
    assert (int8 * expected).sum(axis=1).min() > 0.97
    assert [int8_model.count_tokens(t) for t in count_texts] == torch_side["token_counts"]
    assert onnx_export.torch_vectors(texts) == pytest.approx(expected, abs=1e-5)  # the check's torch side


def test_the_stored_reference_is_sentence_transformers_output():
    stored = json.loads(reference.FILE.read_text())
    assert stored["texts"] == reference.TEXTS and stored["count_texts"] == reference.COUNT_TEXTS
    fresh = reference.compute(stored["texts"], stored["count_texts"])
    assert fresh["token_counts"] == stored["token_counts"]
    assert np.abs(np.array(fresh["vectors"]) - np.array(stored["vectors"])).max() < 1e-5
