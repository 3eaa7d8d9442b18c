"""What a message looks like: the template context of one message, and its HTML."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db.models import F
from django.template import Context, Template
from django.urls import NoReverseMatch, reverse

from chat import selectors
from chat.models import AnswerFeedback, Message
from chat.rendering import answer_markdown, citation_to_dict, passages_from_results, render_answer, viewer_url  # noqa: F401 (re-exported)
from documents.selectors import with_outdated
from ragchat.partials import render_partial
from ragchat.services.prompts import INSUFFICIENT_CONTEXT_ANSWER, MODEL_INSUFFICIENT_SENTENCE
from ragchat.services.rag_service import STRATEGY_SMALLTALK


def streaming_body(text: str, passages: list[dict[str, Any]], *, prefix: str) -> str:
    return render_answer(text, known=passages, prefix=prefix, streaming=True).html


def escalate_url(message: Message) -> str:
    """The routing app's "ask the owner" endpoint for this message, once it exists."""
    try:
        return reverse("routing:escalate", args=[message.pk])
    except NoReverseMatch:
        return ""


def feedback_url(message: Message) -> str:
    """The routing app's vote endpoint for this answer (a down vote becomes a review item there)."""
    try:
        return reverse("routing:feedback", args=[message.pk])
    except NoReverseMatch:
        return ""


def feedback_votable(message: Message) -> bool:
    """Vote buttons: finished answers of the assistant or a person; not greetings, failed or
    streaming ones (access.policy.may_give_feedback decides the same on POST, with the asker)."""
    return (
        message.role in (Message.Role.ASSISTANT, Message.Role.OWNER)
        and message.status == Message.Status.COMPLETE
        and message.query_strategy != STRATEGY_SMALLTALK
        and bool(message.content)
        and bool(message.pk)
    )


def feedback_of(messages: list[Message]) -> dict[int, AnswerFeedback]:
    """The asker's vote on each of these answers (one query). Sessions are private: the only person
    who can vote on a session's answers is its owner."""
    ids = [m.pk for m in messages if feedback_votable(m)]
    if not ids:
        return {}
    rows = AnswerFeedback.objects.filter(message_id__in=ids, user_id=F("message__session__owner_id"))
    return {f.message_id: f for f in rows}


def feedback_context(message: Message, feedback: AnswerFeedback | None, *, editing: bool = False) -> dict[str, Any]:
    """The vote bar of one answer (templates/chat/_feedback.html)."""
    return {
        "fb_msg": message,
        "fb_url": feedback_url(message),
        "fb": feedback,
        "fb_vote": feedback.vote if feedback else 0,
        # A down vote without a reason yet, or the asker asked to change it: the reason form opens.
        "fb_form_open": editing or (feedback is not None and feedback.vote == -1 and not feedback.reason),
        "fb_reasons": AnswerFeedback.Reason.choices,
    }


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


# What became of answers sent to a person: routing answers it (chat cannot import routing; the
# routing app registers its lookup when Django starts). Message id -> {"to": a name or "", "tag": a
# tag name or "", "fallback": bool, "answered": bool, "answered_by": a name}.
RouteStatuses = Callable[[list[int]], dict[int, dict[str, Any]]]
_route_statuses: RouteStatuses | None = None


def route_statuses_provide(lookup: RouteStatuses) -> None:
    global _route_statuses
    _route_statuses = lookup


def route_statuses(messages: list[Message]) -> dict[int, dict[str, Any]]:
    ids = [m.pk for m in messages if m.role == Message.Role.ASSISTANT and m.pk]
    return _route_statuses(ids) if _route_statuses is not None and ids else {}


# What verified knowledge a citation points to has become (routing.knowledge.badge_states): the
# citations with their verified / verified_by / verified_at / knowledge_status metadata as the
# database has them now, so an old answer shows "Needs review" once its source does.
KnowledgeStates = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
_knowledge_states: KnowledgeStates | None = None


def knowledge_states_provide(lookup: KnowledgeStates) -> None:
    global _knowledge_states
    _knowledge_states = lookup


def knowledge_states(citations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return _knowledge_states(citations) if _knowledge_states is not None and citations else citations


STOPPED = "Stopped"  # the stored error_type of an answer its asker stopped (chat.turns stores it)


def sources_known(message: Message) -> list[dict[str, Any]]:
    """The sources an answer's markers may name: its citations once complete; the passages found
    while it streams, or when it failed or was stopped (its markers name those)."""
    return list((message.citations if message.status == Message.Status.COMPLETE else message.passages) or [])


def answer_failed(message: Message) -> bool:
    return message.role == Message.Role.ASSISTANT and message.status in (
        Message.Status.FAILED,
        Message.Status.INTERRUPTED,
    )


def passages_found(message: Message, *, cited: set[str]) -> list[dict[str, Any]]:
    """What a failed or stopped answer found besides what its text cites: shown under it as a
    search result the asker can still use (on the page and in an export)."""
    if not answer_failed(message):
        return []
    return [p for p in (message.passages or []) if p["source_id"] not in cited]


def message_context(message: Message) -> dict[str, Any]:
    prefix = f"m{message.pk}"
    ctx: dict[str, Any] = {"msg": message, "prefix": prefix, "body": "", "sources": [], "passages": []}
    if message.role == Message.Role.USER:
        return ctx
    known = sources_known(message)
    # Documents marked outdated since the answer was written carry a warning (one query per answer).
    known = with_outdated(known or [])
    content = message.content
    if message.action == "ROUTE" and content.strip() == INSUFFICIENT_CONTEXT_ANSWER:
        # The spec's canned text ends "Please contact the relevant team": the question has gone to
        # a person already, and the notice under it says to whom.
        content = MODEL_INSUFFICIENT_SENTENCE
    grounding = message.grounding if message.status == Message.Status.COMPLETE and content == message.content else None
    known = knowledge_states(list(known or []))
    rendered = render_answer(content, known=known, prefix=prefix, grounding=grounding)
    ctx["body"] = rendered.html
    ctx["sources"] = rendered.sources
    if message.status == Message.Status.COMPLETE and content:
        ctx["copy_text"] = answer_markdown(content, known=known or [])
    if message.role == Message.Role.OWNER:
        return ctx
    smalltalk = message.query_strategy == STRATEGY_SMALLTALK
    ctx.update(
        {
            "confidence": confidence_context(message),
            "route": message.route_target if message.action == "ROUTE" else None,
            "failed": answer_failed(message),
            "stopped": message.error_type == STOPPED,
            "smalltalk": smalltalk,
            "escalate_url": "" if smalltalk else escalate_url(message),
            # An answer already sent to the owner (the core routed it) has nothing more to ask.
            "regenerate": message.status == Message.Status.COMPLETE and not smalltalk,
            "show_ask_owner": not smalltalk
            and message.status != Message.Status.STREAMING
            and message.action != "ROUTE",
        }
    )
    ctx["passages"] = [
        {**p, "url": render_answer_url(p), "viewer_url": viewer_url(p)}
        for p in passages_found(message, cited={s["source_id"] for s in rendered.sources})
    ]
    return ctx


def render_answer_url(passage: dict[str, Any]) -> str:
    from chat.rendering import source_url

    return source_url(passage)


# The CSRF token's place in a websocket frame's forms. The consumer replaces the whole hidden input
# ({% csrf_token %}'s markup, csrf_slot_input()), whose raw quotes no rendered text has (Markdown
# escapes them).
CSRF_SLOT = "\ue004"


@functools.cache
def csrf_slot_input() -> str:
    """{% csrf_token %}'s markup holding CSRF_SLOT as its token."""
    return Template("{% csrf_token %}").render(Context({"csrf_token": CSRF_SLOT}))


def message_html(
    message: Message,
    *,
    oob: bool = False,
    versions: tuple[int, int] | None | bool = True,
    routed: dict[str, Any] | None | bool = True,
    feedback: AnswerFeedback | None | bool = True,
    csrf_token: str = "",
) -> str:
    """One message's article. `versions`: (number, count) of a regenerated answer among its
    question's answers (older ones render hidden, with a switcher); `routed`: what became of it if
    it was sent to a person. True looks either up (a page of messages passes them in, looked up
    once for all).

    `csrf_token`: the page's token (chat.views passes get_token(request)), so the vote and "Ask the
    owner" forms post without script. A websocket frame passes none: it is rendered once and sent
    to every tab of the session, which may be other browsers with other CSRF cookies, so its forms
    hold CSRF_SLOT, which each tab's consumer replaces with a token for its own browser
    (chat.consumers)."""
    if versions is True:
        versions = selectors.answer_versions_of(message)
    if routed is True:
        routed = route_statuses([message]).get(message.pk)
    # What {% csrf_token %} reads (a RequestContext sets it on a page).
    ctx = {**message_context(message), "oob": oob, "csrf_token": csrf_token or CSRF_SLOT}
    if feedback_votable(message) and feedback_url(message):
        if feedback is True:
            feedback = feedback_of([message]).get(message.pk)
        ctx["feedback"] = feedback_context(message, feedback or None)
    if routed:
        # Sent to a person (by the core's rule or "Ask the owner"): say to whom and whether they
        # answered; nothing more to ask.
        ctx.update({"routed": routed, "show_ask_owner": False})
    if versions:
        number, count = versions
        ctx.update({"version": number, "versions": count, "older_version": number < count})
    return render_partial("chat/_message.html", ctx)
