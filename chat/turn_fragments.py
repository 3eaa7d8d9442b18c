"""The HTML fragments of a turn, sent to every open tab of its session through the session's channel
group (htmx oob swaps): the question and the draft at its start, the stage, the streamed draft, the
composer's note.

The draft is rendered as the final answer will be (chat.rendering.DraftRenderer: Markdown and
citation markers, settled blocks once, then only the open tail), so the final render replaces it
without a layout jump.
"""

from __future__ import annotations

from channels.layers import get_channel_layer

from chat import services
from chat.rendering import DraftRenderer
from chat.turn_state import Turn
from ragchat.partials import render_partial

MSG_BUSY = "Please wait until the current answer is finished."


def note_html(text: str = "", *, kind: str = "error", outcome: str = "", transient: bool = False) -> str:
    """The composer's note (a validation problem, "please wait"); empty text clears it. `outcome`
    tells the page what became of the question it sent: "accepted" (the composer may clear),
    "refused" or "busy" (the composer keeps the text). A `transient` note (a "please wait" for a
    button) leaves once no answer is being written."""
    return render_partial("chat/_note.html", {"text": text, "kind": kind, "outcome": outcome, "transient": transient})


async def group_send_html(session_id, html: str) -> None:
    await get_channel_layer().group_send(
        services.session_group_name(session_id), {"type": "chat.fragment", "html": html}
    )


def draft_body(turn: Turn) -> str:
    """The draft's HTML, the same as presenters.streaming_body() gives, in time for what is new."""
    if turn.renderer is None or turn.renderer.prefix != turn.prefix:
        turn.renderer = DraftRenderer(prefix=turn.prefix)
    return turn.renderer.render(turn.text, known=turn.passages)


def draft_article_html(turn: Turn, *, oob: str = "true") -> str:
    """The whole draft as it stands (first frame, and a snapshot for a tab that connects late)."""
    return render_partial("chat/_draft.html", {"turn": turn, "body": draft_body(turn), "oob": oob})


def stage_html(turn: Turn) -> str:
    return render_partial("chat/_stage.html", {"turn": turn})


_BODY_SLOT = "\ue003"  # a private-use character: never in rendered Markdown, which nh3 passes through


def body_html(turn: Turn) -> str:
    """A streamed frame: the draft's body in its oob wrapper. The wrapper is rendered once per turn
    and split around the body's slot: a template render per frame cost more than the frame's text."""
    if turn.body_shell is None:
        shell = render_partial("chat/_draft_body.html", {"prefix": turn.prefix, "body": _BODY_SLOT})
        head, tail = shell.split(_BODY_SLOT)
        turn.body_shell = (head, tail)
    head, tail = turn.body_shell
    return head + draft_body(turn) + tail


def turn_start_html(turn: Turn, *, user_html: str, title: str) -> str:
    """The turn's first frame: the question (appended, or replaced in place) and its draft."""
    return render_partial(
        "chat/_turn_start.html",
        {"user_html": user_html, "turn": turn, "body": draft_body(turn), "title": title, "session_id": turn.session_id},
    )
