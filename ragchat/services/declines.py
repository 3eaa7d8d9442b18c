"""A model's "I don't know", recognised (the one home of that rule) and held back on the stream.

Small models often decline although a passage of their prompt states the answer: with five
passages in the prompt, a 0.5B model read "8 failed sign-in attempts lock the account" and wrote
that the context does not say. The pipeline then takes a second look (rag_service.py): the same
prompt with only the passages that hold most of the question's words. So that the asker never sees
a decline replaced by an answer, an answer that opens like a decline is held back until its first
sentence has ended; any other answer streams as it comes (the hold costs a word or two).
"""

from __future__ import annotations

import re

from .prompts import MODEL_INSUFFICIENT_SENTENCE

# What small models write instead of the prompt's exact sentence when they do not know.
_DONT_KNOW_RE = re.compile(
    r"(don'?t|do not|does not|doesn'?t) (have|contain|provide|include|mention|specify|say|state)\b[^.]*"
    r"\b(information|details?|answer|mention)"
    r"|not (enough|sufficient) information|no information (about|on|regarding)"
    r"|(is|are) not (mentioned|specified|provided|stated|available)"
    r"|(can ?not|can't|unable to) (find|answer|determine|provide)"
    r"|\b(context|documents?|information|passages?|text|sources?) (does not|doesn'?t|do not|don'?t|did not)"
    r" (mention|specify|say|state|include|contain|provide|cover|give)\b"
    r"|\bI don'?t know\b",
    re.IGNORECASE,
)

# How declines open: an answer whose first words are one of these (or could still become one) is
# held until its first sentence ends.
_OPENERS = tuple(
    tuple(opener.split())
    for opener in (
        "i don't",
        "i do not",
        "i'm sorry",
        "i am sorry",
        "i cannot",
        "i can't",
        "i could not",
        "i couldn't",
        "i'm unable",
        "i am unable",
        "i'm not able",
        "sorry",
        "unfortunately",
        "the context",
        "the provided context",
        "the given context",
        "the documents",
        "the provided documents",
        "the available documents",
        "the provided information",
        "the information provided",
        "there is no",
        "there's no",
        "no information",
    )
)
_WORD_RE = re.compile(r"[a-z']+")
_SENTENCE_END_RE = re.compile(r"[.!?](\s|$)|\n")


def says_dont_know(text: str) -> bool:
    """The text declines: the prompt's sentence, or a small model's own words for it."""
    return MODEL_INSUFFICIENT_SENTENCE.rstrip(".").lower() in text.lower() or bool(_DONT_KNOW_RE.search(text))


def _words(text: str) -> list[str]:
    return _WORD_RE.findall(text.lower().replace("\u2019", "'"))


def _opens_like_a_decline(text: str, *, complete: bool) -> bool | None:
    """True: the text opens with a decline's opener; False: it cannot; None: too few words to say
    (the words so far are the start of an opener, and more may come)."""
    words = _words(text)
    if not words:
        return None if not complete else False
    # the last word may still be growing unless white space follows it
    settled = words if complete or text[-1:].isspace() else words[:-1]
    undecided = False
    for opener in _OPENERS:
        n = len(opener)
        if tuple(settled[:n]) == opener:
            return True
        if tuple(settled) == opener[: len(settled)]:
            undecided = True
    return None if undecided else False


class DeclineGate:
    """Streams an answer through, except one that opens like a decline: that one is held until its
    first sentence has ended, and then, if that sentence declines, to the end (`declined`); the
    caller decides what to do with `held`. feed() returns what may be shown now."""

    def __init__(self) -> None:
        self.held = ""
        self.declined = False
        self._open = False  # decided: streams through

    def feed(self, piece: str) -> str:
        if self._open:
            return piece
        self.held += piece
        if self.declined:
            return ""
        opens = _opens_like_a_decline(self.held, complete=False)
        if opens is False:
            return self._release()
        if opens is None:
            return ""
        first = _SENTENCE_END_RE.search(self.held.lstrip())
        if first is None:
            return ""
        if says_dont_know(self.held.lstrip()[: first.end()]):
            self.declined = True
            return ""
        return self._release()

    def finish(self) -> str:
        """The end of the answer: what is still held, unless it declines (then `held` keeps it)."""
        if self._open or self.declined:
            return ""
        if self.held and says_dont_know(self.held):
            self.declined = True
            return ""
        return self._release()

    def _release(self) -> str:
        out, self.held, self._open = self.held, "", True
        return out
