"""Saved emails (.eml, RFC 5322 / MIME; Python's own `email` package with its modern policy).

The header (subject, sender, recipients, date) opens the document; the body follows, its HTML
part cleaned exactly as an uploaded page is (html.py) when there is one, else its plain text.
Attachments are handed back in `ParsedDocument.attachments`, the first `MAX_ATTACHMENTS` of them,
for the caller to ingest as documents of their own; inline pictures are left out. Nothing in the
message is fetched (remote images, links) or run.
"""

from __future__ import annotations

import email
import re
from email import policy
from email.message import EmailMessage
from typing import Any

from ragchat.services.errors import CorruptDocumentError
from ragchat.services.parsing import html
from ragchat.services.parsing.base import MIME_TYPES, Attachment, ParsedDocument, TextBlock
from ragchat.services.parsing.filenames import safe_filename
from ragchat.services.parsing.textutil import clean_inline, clean_text, filename_title

MAX_ATTACHMENTS = 20


def parse(*, data: bytes, filename: str, max_unpacked_bytes: int) -> ParsedDocument:
    try:
        message = email.message_from_bytes(data, policy=policy.default)
        subject = _header(message, "subject")
        header_lines = [
            f"{label}: {value}"
            for label, value in (
                ("Subject", subject),
                ("From", _header(message, "from")),
                ("To", _header(message, "to")),
                ("Cc", _header(message, "cc")),
                ("Date", _header(message, "date")),
            )
            if value
        ]
        body = _body_blocks(message, filename, max_unpacked_bytes)
        attachments, skipped = _attachments(message)
    except (LookupError, ValueError, TypeError, IndexError, AttributeError) as e:
        raise CorruptDocumentError("This email file is damaged and cannot be read; save it again and upload it.") from e
    section = subject or None
    blocks = [TextBlock(text="\n".join(header_lines), section=section)] if header_lines else []
    blocks += [
        TextBlock(text=b.text, section=b.section or section, is_heading=b.is_heading, is_row=b.is_row) for b in body
    ]
    warnings: list[str] = []
    if len(attachments) > MAX_ATTACHMENTS:
        warnings.append(
            f"This email has {len(attachments)} attachments; the first {MAX_ATTACHMENTS} were added as documents of "
            "their own, the others were not."
        )
        attachments = attachments[:MAX_ATTACHMENTS]
    if skipped:
        warnings.append(f"Attachments without a readable file were skipped: {', '.join(skipped[:10])}.")
    return ParsedDocument(
        mime_type=MIME_TYPES["eml"],
        kind="eml",
        title=subject or filename_title(filename),
        pages=None,
        blocks=blocks,
        warnings=warnings,
        attachments=attachments,
    )


def _header(message: EmailMessage, name: str) -> str:
    try:
        value = message.get(name)
    except (ValueError, TypeError, IndexError):  # a malformed header: the raw text is better than nothing
        value = message.get_all(name, [""])[0] if hasattr(message, "get_all") else ""
    return clean_inline(str(value or ""))[:500]


def _content(part: Any) -> str:
    try:
        content = part.get_content()
    except (LookupError, ValueError, AssertionError):  # an unknown charset: decode what is there
        payload = part.get_payload(decode=True) or b""
        content = payload.decode("utf-8", errors="replace")
    return content if isinstance(content, str) else ""


def _body_blocks(message: EmailMessage, filename: str, max_unpacked_bytes: int) -> list[TextBlock]:
    body = message.get_body(preferencelist=("html", "plain"))
    if body is None:
        return []
    content = _content(body)
    if body.get_content_type() == "text/html":
        return html.parse(data=content.encode("utf-8"), filename=filename, max_unpacked_bytes=max_unpacked_bytes).blocks
    text = clean_text(content)
    return [TextBlock(text=p.strip()) for p in re.split(r"\n\s*\n", text) if p.strip()]


def _attachments(message: EmailMessage) -> tuple[list[Attachment], list[str]]:
    found: list[Attachment] = []
    skipped: list[str] = []
    for part in message.iter_attachments():
        disposition = part.get_content_disposition()
        name = part.get_filename() or ""
        if disposition == "inline" and part.get_content_maintype() == "image":
            continue  # a picture in the body (a logo, a signature)
        if part.get_content_type() == "message/rfc822":
            inner = part.get_payload()
            inner = inner[0] if isinstance(inner, list) and inner else inner
            if isinstance(inner, EmailMessage):
                data = inner.as_bytes()
                name = name or f"{_header(inner, 'subject') or 'message'}.eml"
            else:
                data = b""
        else:
            payload = part.get_payload(decode=True)
            data = payload if isinstance(payload, bytes) else b""
        if not data:
            if name:
                skipped.append(safe_filename(name))
            continue
        found.append(Attachment(filename=safe_filename(name or "attachment"), data=data))
    return found, skipped
