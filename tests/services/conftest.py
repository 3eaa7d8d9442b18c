"""Fixtures of the core's tests."""

from __future__ import annotations

import pytest


class MiniLMTokenizer:
    """The model's own tokenizer.json (exported beside the model by the install) in the Rust tokenizers
    library, as transformers' fast tokenizer runs it: no truncation, no padding."""

    def __init__(self) -> None:
        from tokenizers import Tokenizer

        from ragchat.services import onnx_model

        folder = onnx_model.model_path(None, "onnx-int8").parent
        self._tokenizer = Tokenizer.from_file(str(folder / onnx_model.TOKENIZER_FILE))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=add_special_tokens).ids


@pytest.fixture(scope="module")
def tokenizer():
    return MiniLMTokenizer()
