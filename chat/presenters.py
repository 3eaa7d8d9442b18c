"""What a message looks like: the template context of one message, and its HTML."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.urls import NoReverseMatch, reverse

from chat.models import Message
from chat.rendering import citation_to_dict, passages_from_results, render_answer  # noqa: F401 (re-exported)
from ragchat.partials import render_partial
from ragchat.services.rag_service import STRATEGY_SMALLTALK


def streaming_body(text: str, passages: list[dict[str, Any]], *, prefix: str) -> str:
    return render_answer(text, known=passages, prefix=prefix, streaming=True).html


def escalate_url(message: Message) -> str:
    """The routing app's "ask the owner" endpoint for this message, once it exists."""
    try:
        return reverse("routing:escalate", args=[message.pk])
    except NoReverseMatch:
        return ""


def _percent(value: Any) -> int:
    try:
        return round(float(value) * 100)
    except (TypeError, ValueError):
        return 0


def confidence_context(message: Message) -> dict[str, Any] | None:
    c = message.confidence or {}
    if "overall" not in c or message.query_strategy == STRATEGY_SMALLTALK:
        return None
    threshold = settings.RAG.rag_confidence_threshold
    overall = int(c["overall"])
    return {
        "overall": overall,
        "level": "high" if overall >= max(threshold, 80) else ("ok" if overall >= threshold else "low"),
        "retrieval": _percent(c.get("retrieval")),
        "coverage": _percent(c.get("coverage")),
        "llm": int(c.get("llm") or 0),
        "threshold": threshold,
    }


def message_context(message: Message) -> dict[str, Any]:
    prefix = f"m{message.pk}"
    ctx: dict[str, Any] = {"msg": message, "prefix": prefix, "body": "", "sources": [], "passages": []}
    if message.role == Message.Role.USER:
        return ctx
    known = message.citations if message.status == Message.Status.COMPLETE else message.passages
    rendered = render_answer(message.content, known=known or [], prefix=prefix)
    ctx["body"] = rendered.html
    ctx["sources"] = rendered.sources
    if message.role == Message.Role.OWNER:
        return ctx
    smalltalk = message.query_strategy == STRATEGY_SMALLTALK
    ctx.update(
        {
            "confidence": confidence_context(message),
            "route": message.route_target if message.action == "ROUTE" else None,
            "failed": message.status in (Message.Status.FAILED, Message.Status.INTERRUPTED),
            "smalltalk": smalltalk,
            "escalate_url": "" if smalltalk else escalate_url(message),
            "show_ask_owner": not smalltalk and message.status != Message.Status.STREAMING,
        }
    )
    if ctx["failed"]:
        # The passages the turn found, as a cited search result the asker can still use.
        cited = {s["source_id"] for s in rendered.sources}
        ctx["passages"] = [
            {**p, "url": render_answer_url(p)} for p in (message.passages or []) if p["source_id"] not in cited
        ]
    return ctx


def render_answer_url(passage: dict[str, Any]) -> str:
    from chat.rendering import document_url

    return document_url(passage["document_id"])


def message_html(message: Message, *, oob: bool = False) -> str:
    return render_partial("chat/_message.html", {**message_context(message), "oob": oob})
