"""Greetings, thanks and goodbyes are answered directly (R-CHAT-6): no retrieval, no LLM, no route.

Only a message that is nothing but small talk matches; "hi, how many vacation days?" carries a
question and goes through the RAG pipeline.

References: requirement IDs (R-…): docs/requirements.md.
"""

from __future__ import annotations

import re

from .prompts import SMALLTALK_REPLIES

_LEAD = r"(?:(?:ok|okay|oh|ah|great|perfect|awesome|cool|nice|wonderful|brilliant|super)\s+)?"
_ADDRESS = r"(?:\s+(?:there|all|everyone|everybody|team|folks|guys|friend|bot|again))?"
_GREETING = (
    r"(?:hi|hii+|hello|hallo|hey|heya|hiya|howdy|greetings|yo|good\s+(?:morning|afternoon|evening|day)"
    r"|how\s+are\s+you(?:\s+(?:doing|today))?|how\s+is\s+it\s+going|what'?s\s+up|sup)"
)
_THANKS = (
    r"(?:thanks|thank\s+you|thankyou|thx|ty|tysm|cheers|many\s+thanks|much\s+appreciated"
    r"|appreciate\s+it|i\s+appreciate\s+it|that\s+helps|that\s+helped)"
    r"(?:\s+(?:a\s+lot|so\s+much|very\s+much|a\s+million|again|loads))?"
    r"(?:\s+for\s+(?:your|the|all\s+the)\s+help)?"
)
_GOODBYE = (
    r"(?:bye|bye\s+bye|goodbye|good\s+bye|see\s+you(?:\s+later|\s+soon)?|see\s+ya|later|cya"
    r"|good\s+night|take\s+care|have\s+a\s+(?:nice|good|great)\s+(?:day|one|evening|weekend))"
)
_KINDS = {"greeting": _GREETING, "thanks": _THANKS, "goodbye": _GOODBYE}
_ANY_UNIT = rf"{_LEAD}(?:{_GREETING}|{_THANKS}|{_GOODBYE}){_ADDRESS}"
# One to three small-talk phrases ("thanks, bye!"), and nothing else.
_WHOLE = re.compile(rf"^{_ANY_UNIT}(?:\s+{_ANY_UNIT}){{0,2}}$")
_PUNCT = re.compile(r"[^\w\s']+")


def _normalise(text: str) -> str:
    return " ".join(_PUNCT.sub(" ", text.lower()).split())


def smalltalk_kind(query: str) -> str | None:
    """'greeting', 'thanks' or 'goodbye' if the message is only small talk, else None."""
    text = _normalise(query)
    if not text or not _WHOLE.match(text):
        return None
    # The reply answers the last thing said: "hi, thanks!" is thanks; "thanks, bye" is goodbye.
    best: tuple[int, str] | None = None
    for kind, pattern in _KINDS.items():
        for match in re.finditer(rf"(?<!\w)(?:{pattern})(?!\w)", text):
            if best is None or match.start() >= best[0]:
                best = (match.start(), kind)
    return best[1] if best else None


def detect_smalltalk(query: str) -> str | None:
    """The direct reply for a greeting / thanks / goodbye message, or None for anything else."""
    kind = smalltalk_kind(query)
    return SMALLTALK_REPLIES[kind] if kind else None
