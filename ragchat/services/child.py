"""Child processes of the server that do CPU-bound work under a GIL of their own: the embedding
model (`onnx_model.ModelProcess`).

Both ends are this project's code: each message is a length and a pickle, over the child's stdin
(requests) and stdout (replies). Whatever a library prints in the child goes to its stderr. Values
of subclasses of str, int and float (Django's choices, enums) go as the plain value: the child
imports no Django, so it could not load them.
"""

from __future__ import annotations

import io
import os
import pickle
import struct
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[2]


_SCALARS = (str, int, float)


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        # Called for every object but the exact builtin types: a str/int/float subclass goes as its value.
        for base in _SCALARS:
            if isinstance(obj, base) and type(obj) is not bool:
                return base, (base.__str__(obj) if base is str else base(obj),)
        return NotImplemented


def dumps(value: Any) -> bytes:
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buffer.getvalue()


def send(stream: IO[bytes] | None, message: Any) -> None:
    assert stream is not None, "a pipe of a child started by start()"
    data = dumps(message)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def receive(stream: IO[bytes] | None) -> Any:
    assert stream is not None, "a pipe of a child started by start()"
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError("the other end closed the pipe")
    (size,) = struct.unpack("<Q", head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the other end closed the pipe mid-message")
    return pickle.loads(data)


def start(entry: str, *args: str) -> subprocess.Popen[bytes]:
    """A child running `entry` ("module:function", called with `args`) with this repository
    importable, its pipes ready for send/receive."""
    path = os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "PYTHONPATH": str(REPO) + (os.pathsep + path if path else "")}
    return subprocess.Popen(
        [sys.executable, "-m", "ragchat.services.child", entry, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )


def replies_pipe() -> tuple[IO[bytes], IO[bytes]]:
    """In the child: (requests in, replies out). Stdout carries only replies from here on: what a
    library prints goes to stderr."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    return sys.stdin.buffer, out


def main(argv: list[str]) -> None:
    """`python -m ragchat.services.child module:function args...`: the child's entry point (the
    function runs the child's loop), so that the module is imported once, not run as __main__."""
    import importlib

    module, function = argv[0].split(":")
    getattr(importlib.import_module(module), function)(*argv[1:])


if __name__ == "__main__":  # pragma: no cover - a child process
    main(sys.argv[1:])
