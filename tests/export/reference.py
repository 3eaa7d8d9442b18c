"""The torch model's side of the ONNX comparisons: sentence-transformers' vectors and token counts
for the texts of tests/services/minilm_reference.json, which the main suite (no torch) compares the
exported files with. tests/export/test_export.py checks the stored file against them; to write it
again (new texts, new weights):

    scripts/export_env.sh tests/export/requirements.txt python -m tests.export.reference
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FILE = Path(__file__).resolve().parents[1] / "services" / "minilm_reference.json"
TEXTS = [
    "Employees get twenty five vacation days per year.",
    "The VPN requires two factor authentication from every laptop outside the office network.",
    "Receipts for business meals must be submitted within thirty days. " * 30,  # past the 256 window
    "ß, naïve café — 東京 and emoji 🎉 survive the tokenizer.",
]
COUNT_TEXTS = [*TEXTS, "", "word " * 300]


def sentence_transformer() -> Any:
    from sentence_transformers import SentenceTransformer

    from ragchat.services.onnx_export import packaged_model_dir

    model = SentenceTransformer(str(packaged_model_dir()), device="cpu")
    model.max_seq_length = 256  # the app's window (ragchat/services/embeddings.py LOCAL_MAX_SEQ_LENGTH)
    return model


def compute(texts: list[str], count_texts: list[str]) -> dict[str, Any]:
    model = sentence_transformer()
    vectors = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    return {
        "texts": texts,
        "vectors": [[round(float(x), 7) for x in row] for row in vectors],
        "count_texts": count_texts,
        "token_counts": [len(model.tokenizer.tokenize(text)) for text in count_texts],
    }


def dumps(data: dict[str, Any]) -> str:
    """JSON with one line per text and per vector."""
    lines = []
    for key, value in data.items():
        rows = ",\n  ".join(json.dumps(row, ensure_ascii=False) for row in value)
        lines.append(f' "{key}": [\n  {rows}\n ]')
    return "{\n" + ",\n".join(lines) + "\n}\n"


if __name__ == "__main__":  # pragma: no cover - run by hand when the texts or the weights change
    FILE.write_text(dumps(compute(TEXTS, COUNT_TEXTS)))
    print(FILE)
