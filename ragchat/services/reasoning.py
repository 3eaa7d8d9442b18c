"""Reasoning models' thinking kept out of answers and ratings.

qwen3 and deepseek-r1 are asked not to think (`reasoning=False`, see llm.py), but not every model or
Ollama version honours it: some still write `<think>…</think>` (or `<thinking>`) into the content.
That text is the model talking to itself, not an answer: it must not reach the asker, the stored
message, the citations, the grounding check or the token counts.

`strip_think` cleans a whole text; `ThinkFilter` does the same to a stream, holding back only a
tag that may be half-written at the end of a piece, so the pieces it gives out join to exactly
`strip_think` of the whole.
"""

from __future__ import annotations

import re

_OPEN_RE = re.compile(r"<(think|thinking)>", re.IGNORECASE)
_CLOSE_RE = re.compile(r"</(think|thinking)>", re.IGNORECASE)
_TAGS = ("<think>", "<thinking>", "</think>", "</thinking>")


def strip_think(text: str) -> str:
    """`text` without its thinking blocks (an unclosed one runs to the end) and stray closing tags."""
    think = ThinkFilter()
    return think.feed(text) + think.finish()


def after_thinking(text: str) -> str:
    """What a reply says after its thinking: models whose template opens the block in the prompt
    write only the closing tag, so everything before a last `</think>` is thinking too."""
    closes = list(_CLOSE_RE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    return strip_think(text).lstrip()


def _partial_tag_start(text: str) -> int:
    """Where a tag that may still be completing starts at the end of `text` (len(text) if none)."""
    start = text.rfind("<")
    if start == -1 or len(text) - start >= max(map(len, _TAGS)):
        return len(text)
    tail = text[start:].lower()
    return start if any(tag.startswith(tail) for tag in _TAGS) else len(text)


class ThinkFilter:
    """Streaming `strip_think`: `feed` each piece, then `finish` once; join everything returned."""

    def __init__(self) -> None:
        self._pending = ""
        self._thinking = False
        self._after_block = False  # white space right after a thinking block is dropped too

    def feed(self, piece: str) -> str:
        self._pending += piece
        out: list[str] = []
        while True:
            if self._thinking:
                close = _CLOSE_RE.search(self._pending)
                if close is None:
                    # Keep only what may be the start of the closing tag.
                    self._pending = self._pending[_partial_tag_start(self._pending) :]
                    break
                self._pending = self._pending[close.end() :]
                self._thinking, self._after_block = False, True
                continue
            if self._after_block:
                self._pending = self._pending.lstrip()
                if not self._pending:
                    break
                self._after_block = False
            opening = _OPEN_RE.search(self._pending)
            if opening is not None:
                out.append(_CLOSE_RE.sub("", self._pending[: opening.start()]))
                self._pending = self._pending[opening.end() :]
                self._thinking = True
                continue
            cut = _partial_tag_start(self._pending)
            out.append(_CLOSE_RE.sub("", self._pending[:cut]))
            self._pending = self._pending[cut:]
            break
        return "".join(out)

    def finish(self) -> str:
        """The held-back rest: a half tag is text after all; an unclosed thinking block is dropped."""
        rest, self._pending = ("" if self._thinking else self._pending), ""
        return rest.lstrip() if self._after_block else rest
