"""A chat as a file to keep or share: Markdown, or PDF (WeasyPrint renders the same content as HTML).
Messages are exported as their owner sees them now (chat.selectors.messages_as_seen_by): an answer
withheld on the page is withheld in the file too. Answers carry their citations numbered as on the
page, with the sources listed under each."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.staticfiles import finders
from django.utils import timezone
from django.utils.text import slugify

from chat import selectors
from chat.models import ChatSession, Message
from chat.presenters import STOPPED, passages_found, sources_known
from chat.rendering import answer_markdown, markdown_to_html
from ragchat.dates import shown_datetime
from ragchat.partials import render_partial
from ragchat.services.citations import cited_source_ids


@dataclass(frozen=True)
class ExportedMessage:
    heading: str
    markdown: str
    note: str = ""


def _author(message: Message, version: tuple[int, int] | None) -> str:
    if message.role == Message.Role.USER:
        return "You"
    if message.role == Message.Role.OWNER:
        author = message.author
        name = (author.get_full_name() or author.get_username()) if author else "a colleague"
        return f"Answer from {name} (verified by a person)"
    # A regenerated question's answers, oldest first: the page shows one at a time, "‹ 1 / 2 ›".
    return f"Assistant · version {version[0]} of {version[1]}" if version else "Assistant"


def _note(message: Message) -> str:
    if message.role != Message.Role.ASSISTANT:
        return ""
    if message.error_type == STOPPED:
        return "Stopped before it finished."
    if message.status in (Message.Status.FAILED, Message.Status.INTERRUPTED):
        return f"Not finished: {message.error}"
    if message.action == "ROUTE":
        return "Unverified draft: the question was sent to the topic's owner."
    return ""


def _markdown(message: Message) -> str:
    """An answer as its page shows it: markers numbered, sources listed, a sentence no source
    supports marked, and what a failed or stopped answer found besides what it cites."""
    return answer_markdown(
        message.content,
        known=sources_known(message),
        grounding=message.grounding if message.status == Message.Status.COMPLETE else None,
        passages=passages_found(message, cited=set(cited_source_ids(message.content))),
    )


def exported_messages(*, user, session: ChatSession) -> list[ExportedMessage]:
    rows = selectors.messages_as_seen_by(user=user, messages=selectors.session_messages(session=session))
    versions = selectors.answer_versions(rows)
    out = []
    for m in rows:
        if m.status == Message.Status.STREAMING:
            continue
        when = shown_datetime(m.created_at)
        text = m.content if m.role == Message.Role.USER else _markdown(m)
        out.append(ExportedMessage(heading=f"{_author(m, versions.get(m.pk))} · {when}", markdown=text, note=_note(m)))
    return out


def filename(session: ChatSession, extension: str) -> str:
    return f"{slugify(session.title)[:60] or 'chat'}.{extension}"


def session_markdown(*, user, session: ChatSession) -> str:
    stamp = shown_datetime(timezone.now())
    parts = [f"# {session.title}", "", f"_Exported from ragchat on {stamp}._"]
    for m in exported_messages(user=user, session=session):
        parts += ["", f"## {m.heading}", "", m.markdown]
        if m.note:
            parts += ["", f"_{m.note}_"]
    return "\n".join(parts) + "\n"


def session_pdf(*, user, session: ChatSession) -> bytes:
    from weasyprint import CSS, HTML  # imported here: loading pango costs ~0.3 s, only exports need it

    messages = [
        {"heading": m.heading, "html": markdown_to_html(m.markdown), "note": m.note}
        for m in exported_messages(user=user, session=session)
    ]
    html = render_partial(
        "chat/export.html",
        {"session": session, "messages": messages, "stamp": shown_datetime(timezone.now())},
    )
    return HTML(string=html).write_pdf(stylesheets=[CSS(filename=finders.find("css/export.css"))])
