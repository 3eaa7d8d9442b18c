"""The project's fake Ollama server (ragchat/fake_ollama) as its own process, for the websocket
benchmarks: it must not share a GIL with the clients that measure it.

    python -m ragchat.bench.fake_llm --log FILE
prints `URL <base url>` on stdout, then serves until stdin closes. A stdin line `delay <seconds>`
sets the delay between streamed pieces (0 = zero-latency model); `style markdown` (or `style plain`)
sets the shape of the answers; `pieces token` streams one chunk per token, the word with the space
after it, as Ollama does (the default), `pieces split` the fake's own word and space chunks.

Every answer is deterministic and numbered: a question containing `q<id> t<count>` gets
`tok0001x tok0002x ... tok<count>x`, so a client can check that no token is lost or reordered.
When the answer starts, `<id> <unix time>` is appended to the log: with the delay, that gives each
token's scheduled emission time (token i leaves at start + (i - 1) delay, or start + 2 (i - 1) delay
with split pieces, the words and the spaces between them being separate chunks). When its last line is written, `end <id> <unix
time>`: how far the fake itself fell behind its schedule under load.

The markdown style is what a real answer costs to render: the same numbered tokens, every fifth in
bold, a paragraph break after every eighth, which also cites one of the prompt's SourceIds (glued to
the word, so each token stays one chunk, or one word piece plus one whitespace piece when split).
"""

from __future__ import annotations

import argparse
import re
import sys
import threading
import time

QUESTION_RE = re.compile(r"\bq(\d+) t(\d+)\b")
TOKEN_PIECE_RE = re.compile(r"\S+\s*|\s+")


def token_pieces(text: str) -> list[str]:
    """One chunk per numbered token (the word and the whitespace after it)."""
    return TOKEN_PIECE_RE.findall(text)


def numbered_tokens(count: int, *, markdown: bool = False, source_ids: tuple[str, ...] = ()) -> str:
    if not markdown:
        return " ".join(f"tok{i:04d}x" for i in range(1, count + 1))
    out = []
    for i in range(1, count + 1):
        word = f"tok{i:04d}x"
        if i % 5 == 0:
            word = f"**{word}**"
        if i % 8 == 0:
            cite = f"[SourceId: {source_ids[(i // 8) % len(source_ids)]}]" if source_ids else ""
            word = f"{word}{cite}.".replace(" ", "")
        out.append(word)
        if i < count:
            out.append("\n\n" if i % 8 == 0 else " ")
    return "".join(out)


def main() -> None:
    from ragchat.fake_ollama import SOURCE_HEADER_RE, FakeOllama, split_pieces

    parser = argparse.ArgumentParser()
    parser.add_argument("--log", required=True)
    args = parser.parse_args()

    log = open(args.log, "a", buffering=1, encoding="utf-8")
    lock = threading.Lock()
    current = threading.local()  # the question being answered by this handler thread
    style = {"markdown": False, "split": False}

    def log_end() -> None:
        qid = getattr(current, "qid", None)
        if qid is not None:
            with lock:
                log.write(f"end {qid} {time.time():.6f}\n")
            current.qid = None

    def reply(messages):
        users = [str(m.get("content", "")) for m in messages if m.get("role") == "user"]
        match = QUESTION_RE.search(users[-1] if users else "")
        if match is None:
            return "No numbered question found."
        with lock:
            log.write(f"{match.group(1)} {time.time():.6f}\n")
        current.qid = match.group(1)
        system = " ".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
        ids = tuple(dict.fromkeys(SOURCE_HEADER_RE.findall(system)))
        return numbered_tokens(int(match.group(2)), markdown=style["markdown"], source_ids=ids)

    fake = FakeOllama().start()
    fake.reply_with(reply)
    fake.stream_pieces(lambda text: split_pieces(text) if style["split"] else token_pieces(text))
    fake.on_stream_end(log_end)
    print(f"URL {fake.url}", flush=True)
    for line in sys.stdin:
        parts = line.split()
        if len(parts) == 2 and parts[0] == "delay":
            fake.token_delay(float(parts[1]))
            print("OK", flush=True)
        elif len(parts) == 2 and parts[0] == "style":
            style["markdown"] = parts[1] == "markdown"
            print("OK", flush=True)
        elif len(parts) == 2 and parts[0] == "pieces":
            style["split"] = parts[1] == "split"
            print("OK", flush=True)
    fake.stop()


if __name__ == "__main__":
    main()
