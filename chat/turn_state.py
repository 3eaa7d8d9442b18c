"""A chat turn and this process's registry of the turns it runs: one per session at a time.

The registry is what "is an answer being written for this session here?" asks (chat.turn_handover
adds the other processes); chat.turns reserves a session's slot before its first await and frees it
when the turn's task ends.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from chat.models import Message
from chat.rendering import DraftRenderer


class TurnInProgress(Exception):
    """The session already has an answer being written."""


@dataclass(frozen=True)
class TurnEvent:
    """What a caller other than the session's tabs (the JSON API) hears of a turn, in order:
    "stage" (text: the stage), "token" (text: the new text), then "final" (message: the stored
    answer, after the routing signal ran) or, if the task died without one, "closed"."""

    kind: str
    text: str = ""
    message: Message | None = None


@dataclass
class Turn:
    session_id: str
    message_id: int
    question: str
    stage: str = "searching"
    text: str = ""
    passages: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    task: asyncio.Task | None = None
    renderer: DraftRenderer | None = None
    body_shell: tuple[str, str] | None = None  # the streamed frame's wrapper around the body
    stopped: bool = False  # the asker pressed Stop: the task is cancelled, the partial text kept
    listeners: list[asyncio.Queue] = field(default_factory=list)  # TurnEvents for non-websocket callers
    model: str | None = None
    request_id: str | None = None
    inputs: TurnInputs | None = None  # read with the draft, in the turn's one trip before its search
    waits_first_token: bool = False  # counted by turn_stream.first_tokens until its first token is out
    gave_way_in: int = -1  # the burst (turn_stream.first_tokens.epoch) this answer last gave way in
    marks: dict[str, float] = field(default_factory=lambda: {"asked": time.time()})  # step -> wall time
    core_timings: dict[str, float] = field(default_factory=dict)  # the core's own (embed, search, ...), ms
    # The stored answer's render, from its publication on: a tab that connects while the turn winds
    # up (its signals: rating, routing) gets it, not the draft (whose final frame it missed).
    final_html: str = ""

    def mark(self, step: str) -> None:
        """When the turn reached a step (settings.RAGCHAT_TURN_TIMELINE: where a burst's time goes)."""
        self.marks.setdefault(step, time.time())

    @property
    def prefix(self) -> str:
        return f"m{self.message_id}"


@dataclass(frozen=True)
class TurnInputs:
    """What the core is told about the asker and the conversation: the tags they may read, their
    glossary, the history before the question."""

    tags: list[str]
    glossary: list[Any]
    history: list[Any]


_turns: dict[str, Turn] = {}


def turn_register(turn: Turn) -> None:
    """Take the session's one slot (before the turn's first await: a second question cannot slip in)."""
    if turn.session_id in _turns:
        raise TurnInProgress(turn.session_id)
    _turns[turn.session_id] = turn


def turn_unregister(turn: Turn) -> None:
    _turns.pop(turn.session_id, None)


def turns_running() -> list[Turn]:
    return list(_turns.values())


def turns_count() -> int:
    return len(_turns)


def active_turn(session_id) -> Turn | None:
    return _turns.get(str(session_id))


def turn_stop(session_id, *, message_id: int | None = None) -> bool:
    """Stop the session's answer in this process (the asker pressed Stop): what streamed is kept,
    marked stopped. With `message_id`, only that answer. False when no such answer runs here."""
    turn = _turns.get(str(session_id))
    if turn is None or turn.task is None or turn.task.done():
        return False
    if message_id is not None and turn.message_id != message_id:
        return False
    turn.stopped = True
    turn.task.cancel()
    return True
